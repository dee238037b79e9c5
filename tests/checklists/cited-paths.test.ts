import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Every repository path a comment or a document names exists: a file or a
 * folder (`src/db/tenant.ts`, `.ci/services.sh`; a `.js` import path names its
 * `.ts` source), a pattern that matches at least one file
 * (`tests/auth/*.pg.test.ts`), or the start of a file's name
 * (`migrations/0005` for the fifth migration). A file moved or renamed fails
 * here, not in a reader's search. The headings and anchors a citation names
 * are checked by tests/docs/citations.test.ts.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const SCANNED = ['src', 'tests', 'scripts', 'migrations', 'docs', 'examples', '.ci', 'README.md', 'vitest.config.ts'];
const SKIPPED_FOLDERS = new Set(['node_modules', 'dist', '.data', 'screenshots', 'artifacts']);
/** Generated from the OpenAPI document; and the files whose examples name missing paths on purpose. */
const GENERATED = new Set([
  'src/client/schema.d.ts',
  'tests/checklists/cited-paths.test.ts',
  'tests/docs/citations.test.ts',
]);

/**
 * Mentions known to be stale in files this change does not own, to be fixed
 * and then removed from here ("file: mention"). The test fails for an entry
 * that is no longer stale, so the list only shrinks.
 */
const KNOWN_STALE = new Set<string>();

function walk(path: string): string[] {
  const full = join(ROOT, path);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full, { withFileTypes: true }).flatMap((entry) =>
    SKIPPED_FOLDERS.has(entry.name) ? [] : walk(join(path, entry.name)),
  );
}

const scanned = SCANNED.flatMap(walk).filter(
  (file) => /\.(ts|tsx|mjs|js|md|sh|html|css)$|(^|\/)run$/.test(file) && !GENERATED.has(file),
);
const allFiles = ['src', 'tests', 'scripts', 'migrations', 'docs', 'examples', '.ci'].flatMap(walk);

/** A mention as written, with `*`, `**` and `{a,b}` patterns, as a regular expression over repository paths. */
function patternOf(mention: string): RegExp {
  const source = mention
    .split(/(\*\*\/?|\*|\{[^}]*\})/)
    .map((part) => {
      if (part === '**/') return '(?:.*/)?';
      if (part === '**') return '.*';
      if (part === '*') return '[^/]*';
      if (part.startsWith('{')) return `(?:${part.slice(1, -1).split(',').join('|')})`;
      return part.replace(/[.+?^$()|[\]\\]/g, '\\$&');
    })
    .join('');
  return new RegExp(`^${source}(?:/.*)?$`);
}

/**
 * Does the path (or pattern) name something in the repository? From the
 * root, or from a folder above the mentioning file (an example's own
 * `src/main.ts`). A `.js` import path names its `.ts` source.
 */
function exists(mention: string, from = ''): boolean {
  const bases = [''];
  for (let dir = dirname(from); dir !== '.' && dir !== ''; dir = dirname(dir)) bases.push(`${dir}/`);
  return bases.some((base) => existsFromRoot(`${base}${mention}`));
}

function existsFromRoot(mention: string): boolean {
  if (/[*{]/.test(mention)) {
    const pattern = patternOf(mention);
    return allFiles.some((file) => pattern.test(file));
  }
  const path = mention.replace(/\/$/, '');
  if ([path, path.replace(/\.js$/, '.ts')].some((p) => existsSync(join(ROOT, p)))) return true;
  // The start of a name: `migrations/0005`, `tests/integration/multi-instance`.
  return !/\.\w+$/.test(path) && allFiles.some((file) => file.startsWith(`${path}_`) || file.startsWith(`${path}.`));
}

const PATH = /(?<![\w./@~-])((?:src|tests|scripts|migrations|docs|examples|\.ci)\/[\w.*{},/-]*[\w*}])/g;

/** Every problem of one file, as "file: mention". */
function problemsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const problems: string[] = [];
  for (const [, mention] of text.matchAll(PATH)) {
    // A template (`tests/e2e/${name}`) or a placeholder (`migrations/NNNN_name.ts`), not a path.
    if (/\$|<|\.\.\.|NNN/.test(mention!)) continue;
    if (!exists(mention!, file)) problems.push(`${file}: ${mention}`);
  }
  return problems;
}

describe('paths named in comments and documents', () => {
  const problems = scanned.flatMap(problemsOf);

  it('scans the source, tests, scripts, migrations, docs and examples', () => {
    expect(scanned.length).toBeGreaterThan(200);
    expect(scanned).toEqual(expect.arrayContaining(['README.md', 'docs/security.md', 'src/app.ts']));
  });

  it('names only paths that exist', () => {
    expect(problems.filter((problem) => !KNOWN_STALE.has(problem))).toEqual([]);
  });

  it('lists as known-stale only mentions that are still stale', () => {
    expect([...KNOWN_STALE].filter((entry) => !problems.includes(entry))).toEqual([]);
  });

  it('reports a path that does not exist', () => {
    expect(exists('src/db/tenant.ts')).toBe(true);
    expect(exists('src/db/tenant.js')).toBe(true);
    expect(exists('migrations/0005')).toBe(true);
    expect(exists('tests/auth/*.pg.test.ts')).toBe(true);
    expect(exists('src/**')).toBe(true);
    expect(exists('src/db/no-such-file.ts')).toBe(false);
    expect(exists('migrations/0099')).toBe(false);
    expect(exists('tests/nowhere/*.test.ts')).toBe(false);
    expect(exists('src/main.ts', 'examples/spa/README.md')).toBe(true);
    expect(exists('src/main.ts')).toBe(false);
  });
});
