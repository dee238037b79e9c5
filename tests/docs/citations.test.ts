import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Comments and documents cite only what ships with the repository: the README
 * and docs/ pages by heading, the OpenAPI document, public RFCs and advisories.
 * A reader who cloned the repository cannot follow a citation of a document
 * kept elsewhere ("spec §4", "API.md", a numbered rule of such a document) or
 * of an issue number, so those fail here. The contract itself is docs/api.md,
 * the decisions docs/design.md (README "Contributing").
 *
 * The second check keeps the citations that remain honest: a `docs/x.md
 * "Heading"`, `docs/x.md#anchor` or `README "Heading"` names a page and a
 * heading that exist.
 */

const ROOT = join(import.meta.dirname, '../..');

/** What is scanned: every text file of these folders, and these files. */
const FOLDERS = ['src', 'tests', 'scripts', 'migrations', 'examples', 'docs', '.ci'];
const FILES = ['README.md', 'vitest.config.ts', 'biome.json', 'wrangler.toml', '.env.example', 'package.json'];
const TEXT = /\.(ts|mts|mjs|js|json|md|sh|toml|html|css)$|^run$/;
/** Generated from the OpenAPI document (npm run client:generate), not written by hand; and this file's own examples. */
const GENERATED = new Set(['src/client/schema.d.ts', 'examples/spa/public/app.js', 'tests/docs/citations.test.ts']);
const SKIPPED_FOLDERS = new Set(['node_modules', 'dist']);

/**
 * Off until every citation of the first inventory is rewritten: the lead
 * sets it to true once the last owner's files are done, and from then on it
 * guards every change.
 */
const SWEEP_DONE = true;

function scannedFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(join(ROOT, dir))) {
      const path = `${dir}/${name}`;
      if (SKIPPED_FOLDERS.has(name) || name.startsWith('.')) continue;
      if (statSync(join(ROOT, path)).isDirectory()) walk(path);
      else if (TEXT.test(name) && !GENERATED.has(path)) out.push(path);
    }
  };
  for (const folder of FOLDERS) if (existsSync(join(ROOT, folder))) walk(folder);
  for (const file of FILES) if (existsSync(join(ROOT, file))) out.push(file);
  return out;
}

interface Hit {
  file: string;
  line: number;
  text: string;
}

/** A comment continued on the next line reads as one sentence: `* ` and `// ` are dropped. */
function joined(source: string): { text: string; lineAt: (index: number) => number } {
  const starts: number[] = [];
  let text = '';
  for (const [n, raw] of source.split('\n').entries()) {
    const line = n === 0 ? raw : raw.replace(/^\s*(\*(?!\/)|\/\/|#(?!\S))?\s*/, '');
    starts.push(text.length);
    text += (n === 0 ? '' : ' ') + line;
  }
  const lineAt = (index: number): number => {
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((starts[mid] ?? 0) <= index) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
  return { text, lineAt };
}

/** A section sign is a citation of a public standard only when the standard is named just before it. */
const STANDARD_BEFORE = /(RFC ?\d{3,5}|SP 800-[\w-]+|WebAuthn(?: Level \d)?|FIPS [\d-]+)[,:]? *$/;

const OUTSIDE = [
  { name: 'a document kept outside the repository', pattern: /\bAPI\.md\b|service-spec|\bSTYLE\.md\b|\/work\/shared/g },
  // "the spec", "spec §4", "(spec)", "Spec:"; not `spec.paths`, `const spec =` or `x.spec.ts`.
  { name: 'the specification', pattern: /\b[Ss]pec(?:'s)?\b(?!\s*=[^=>])(?![.[(]\w)(?!-)/g },
  { name: 'a numbered rule of a document', pattern: /\brules? \d+\b/g },
  { name: 'an issue number', pattern: /(?<![/\w])[Ii]ssues? #?\d+|\bitems? \d+\b/g },
];

function outsideCitations(file: string, source: string): Hit[] {
  const { text, lineAt } = joined(source);
  const hits: Hit[] = [];
  for (const { pattern } of OUTSIDE) {
    for (const match of text.matchAll(pattern)) {
      hits.push({ file, line: lineAt(match.index), text: match[0] });
    }
  }
  for (const match of text.matchAll(/§ ?\d/g)) {
    if (!STANDARD_BEFORE.test(text.slice(Math.max(0, match.index - 40), match.index))) {
      hits.push({ file, line: lineAt(match.index), text: text.slice(Math.max(0, match.index - 12), match.index + 6) });
    }
  }
  return hits.sort((a, b) => a.line - b.line);
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const headingsOf = new Map<string, { titles: Set<string>; slugs: Set<string> }>();
function headings(page: string): { titles: Set<string>; slugs: Set<string> } | undefined {
  if (!existsSync(join(ROOT, page))) return undefined;
  let found = headingsOf.get(page);
  if (!found) {
    const titles = new Set<string>();
    let inFence = false;
    for (const line of readFileSync(join(ROOT, page), 'utf8').split('\n')) {
      if (line.startsWith('```')) inFence = !inFence;
      const title = inFence ? undefined : /^#{1,6} (.+)$/.exec(line)?.[1];
      if (title) titles.add(title.trim());
    }
    found = { titles, slugs: new Set([...titles].map(slug)) };
    headingsOf.set(page, found);
  }
  return found;
}

/** `docs/x.md "Heading"`, `docs/x.md#anchor`, `README "Heading"`, `(x.md#anchor)` inside docs/. */
const CITATION = /\b(docs\/[\w-]+\.md|README(?:\.md)?|(?<=\]\()(?:\.\.\/)?[\w-]+\.md)(?:#([\w-]+)|,? "([^"\n]+)")/g;

function brokenCitations(file: string, source: string): Hit[] {
  const { text, lineAt } = joined(source);
  const hits: Hit[] = [];
  for (const match of text.matchAll(CITATION)) {
    const [whole, target = '', anchor, title] = match;
    let page = target.startsWith('README') || target === '../README.md' ? 'README.md' : target;
    if (!page.includes('/') && page !== 'README.md') page = `${file.slice(0, file.lastIndexOf('/'))}/${page}`;
    const found = headings(page);
    const ok = found && (anchor ? found.slugs.has(anchor) : title ? found.titles.has(title) : true);
    if (!ok) hits.push({ file, line: lineAt(match.index), text: whole });
  }
  return hits;
}

const format = (hits: Hit[]): string[] => hits.map((h) => `${h.file}:${h.line}: ${h.text}`);

describe('citations lead somewhere', () => {
  const files = scannedFiles();

  it('scans the source, the tests and the documents', () => {
    expect(files).toContain('src/app.ts');
    expect(files).toContain('README.md');
    expect(files).toContain('docs/api.md');
    expect(files).not.toContain('src/client/schema.d.ts');
  });

  it('recognises each kind of citation of a document outside, and passes a public standard', () => {
    const cited = (source: string): string[] => outsideCitations('x.ts', source).map((h) => h.text);
    expect(cited('// Spec §4 step 7: AND.')).toHaveLength(2);
    expect(cited('/** API.md "Errors". */')).toEqual(['API.md']);
    expect(cited('// Issue 14 item 7: cookies.')).toEqual(['Issue 14', 'item 7']);
    expect(cited('// one hop (spec\n * §8 rule 2)')).toHaveLength(3);
    expect(cited('// the replay guard (RFC 6238 §5.2) and (RFC\n * 9112 §6.3), NIST SP 800-63B §5.2.2')).toEqual([]);
    expect(cited('const spec = await load(); spec.paths; "x.spec.ts"')).toEqual([]);
    expect(cited('see porsager/postgres#1154 and https://github.com/o/r/issues/1208')).toEqual([]);
  });

  it('finds the page and heading a citation names', () => {
    const broken = (source: string): string[] => brokenCitations('src/x.ts', source).map((h) => h.text);
    expect(broken('// docs/api.md "Errors", README "Configuration", docs/design.md#decisions')).toEqual([]);
    expect(broken('// docs/api.md "No such heading" and docs/nowhere.md "Errors"')).toHaveLength(2);
  });

  // Skipped until the sweep is done (see SWEEP_DONE above).
  describe.skipIf(!SWEEP_DONE)('after the sweep', () => {
    it('names a page and a heading that exist', () => {
      const broken = files.flatMap((file) => brokenCitations(file, readFileSync(join(ROOT, file), 'utf8')));
      expect(format(broken)).toEqual([]);
    });

    it('cites no document kept outside the repository and no issue number', () => {
      const hits = files.flatMap((file) => outsideCitations(file, readFileSync(join(ROOT, file), 'utf8')));
      expect(format(hits)).toEqual([]);
    });
  });
});
