import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Imports go one way, entries -> app -> routes -> (auth,
 * middleware) -> db -> (errors, config, logger). Read from the import and
 * export statements of src/** (type-only ones included: a cycle of types is
 * still a cycle).
 */
const SRC = join(import.meta.dirname, '..', 'src');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? files(path) : entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** src-relative file -> its imports: src-relative files for relative specifiers, package names otherwise. */
const graph = new Map<string, { local: string[]; packages: string[] }>();
for (const path of files(SRC)) {
  const text = readFileSync(path, 'utf8');
  const specifiers = [
    ...text.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s+'([^']+)'/gm),
    ...text.matchAll(/^\s*import\s+'([^']+)'/gm),
  ].map((m) => m[1]!);
  const local = specifiers
    .filter((s) => s.startsWith('.'))
    .map((s) => relative(SRC, normalize(join(dirname(path), s))).replace(/\.js$/, '.ts'));
  const packages = specifiers.filter((s) => !s.startsWith('.'));
  graph.set(relative(SRC, path), { local, packages });
}

const under = (prefix: string) => (file: string) => file.startsWith(prefix);
const importsHonoAt = (file: string) =>
  graph.get(file)!.packages.some((p) => p === 'hono' || p.startsWith('hono/') || p.startsWith('@hono/'));
const violations = (from: (file: string) => boolean, forbidden: (target: string) => boolean) =>
  [...graph]
    .filter(([file]) => from(file))
    .flatMap(([file, { local }]) => local.filter(forbidden).map((target) => `${file} -> ${target}`));

describe('import layout', () => {
  it('has no import cycle', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (file: string) => {
      state.set(file, 'open');
      stack.push(file);
      for (const next of graph.get(file)?.local ?? []) {
        if (state.get(next) === 'open') cycles.push([...stack.slice(stack.indexOf(next)), next].join(' -> '));
        else if (!state.has(next)) visit(next);
      }
      stack.pop();
      state.set(file, 'done');
    };
    for (const file of graph.keys()) if (!state.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });

  it('db knows no HTTP and nothing above it', () => {
    const db = under('db/');
    const allowed = (target: string) =>
      target.startsWith('db/') || target.startsWith('shared/') || target.startsWith('../migrations/');
    expect(violations(db, (target) => !allowed(target))).toEqual([]);
    const http = [...graph]
      .filter(
        ([file, { packages }]) =>
          db(file) && packages.some((p) => p === 'hono' || p.startsWith('hono/') || p.startsWith('@hono/')),
      )
      .map(([file]) => file);
    expect(http).toEqual([]);
  });

  // hono's pure helpers (hono/utils/*: a cookie-string parser) are no HTTP; its app, context and middleware are.
  const importsHono = (file: string) =>
    graph
      .get(file)!
      .packages.some(
        (p) => p === 'hono' || (p.startsWith('hono/') && !p.startsWith('hono/utils/')) || p.startsWith('@hono/'),
      );

  it('auth knows no HTTP: it imports no hono, no middleware, no library door, no route, no app', () => {
    expect(
      violations(
        under('auth/'),
        (target) =>
          target.startsWith('routes/') ||
          target.startsWith('middleware/') ||
          target.startsWith('library/') ||
          target === 'app.ts' ||
          target === 'router.ts',
      ),
    ).toEqual([]);
    expect([...graph.keys()].filter((file) => file.startsWith('auth/') && importsHono(file))).toEqual([]);
  });

  it("the library's door (library/) is imported only by routes/auth.ts (and its description by routes/docs.ts) and imports no route or app", () => {
    expect(
      violations(
        (file) => !file.startsWith('library/') && file !== 'routes/auth.ts',
        (target) => target.startsWith('library/') && target !== 'library/document.ts',
      ),
    ).toEqual([]);
    expect(
      violations(
        (file) => file !== 'routes/docs.ts',
        (target) => target === 'library/document.ts',
      ).filter((edge) => !edge.startsWith('library/')),
    ).toEqual([]);
    expect(
      violations(
        under('library/'),
        (target) => target.startsWith('routes/') || target === 'app.ts' || target === 'router.ts',
      ),
    ).toEqual([]);
  });

  it('the shared leaves (shared/) import only each other; platform adapters only leaves', () => {
    // shared/types.ts is read for types only (AppEnv names the session and the database handle).
    expect(
      violations(
        (file) => file.startsWith('shared/') && file !== 'shared/types.ts',
        (target) => !target.startsWith('shared/'),
      ),
    ).toEqual([]);
    expect(
      violations(under('platform/'), (target) => !target.startsWith('shared/') && !target.startsWith('platform/')),
    ).toEqual([]);
  });

  it('nothing imports an entry but another entry', () => {
    expect(violations((file) => !file.startsWith('entries/'), under('entries/'))).toEqual([]);
  });

  it('middleware imports no route, no app and no database code', () => {
    expect(
      violations(
        under('middleware/'),
        (target) =>
          target.startsWith('routes/') || target.startsWith('db/') || target === 'app.ts' || target === 'router.ts',
      ),
    ).toEqual([]);
  });

  it('webhooks/ (signing, URL policy, the deliverer) knows no HTTP framework and nothing above db/ and the leaves', () => {
    expect(
      violations(
        under('webhooks/'),
        (target) =>
          target.startsWith('routes/') ||
          target.startsWith('middleware/') ||
          target.startsWith('library/') ||
          target.startsWith('auth/') ||
          target === 'app.ts' ||
          target === 'router.ts',
      ),
    ).toEqual([]);
    expect([...graph.keys()].filter((file) => file.startsWith('webhooks/') && importsHono(file))).toEqual([]);
  });

  it('sso/ (the OIDC and SAML protocols) knows no HTTP framework and nothing above db/ and the leaves', () => {
    expect(
      violations(
        under('sso/'),
        (target) =>
          target.startsWith('routes/') ||
          target.startsWith('middleware/') ||
          target.startsWith('library/') ||
          target.startsWith('auth/') ||
          target === 'app.ts' ||
          target === 'router.ts',
      ),
    ).toEqual([]);
    expect([...graph.keys()].filter((file) => file.startsWith('sso/') && importsHono(file))).toEqual([]);
  });

  it('scim/ (the SCIM grammar and resources) knows no HTTP framework and no database: JSON in and out', () => {
    expect(
      violations(
        under('scim/'),
        (target) =>
          target.startsWith('routes/') ||
          target.startsWith('middleware/') ||
          target.startsWith('library/') ||
          target.startsWith('auth/') ||
          target.startsWith('db/') ||
          target === 'app.ts' ||
          target === 'router.ts',
      ),
    ).toEqual([]);
    expect([...graph.keys()].filter((file) => file.startsWith('scim/') && importsHono(file))).toEqual([]);
  });

  it('a route file never reaches into another route file (schemas.ts is shared)', () => {
    expect(
      violations(under('routes/'), (target) => target.startsWith('routes/') && target !== 'routes/schemas.ts'),
    ).toEqual([]);
  });

  it('the typed client (src/client, gatehouse/client) imports nothing of the server, and the server nothing of it', () => {
    expect(violations(under('client/'), (target) => !target.startsWith('client/'))).toEqual([]);
    expect(violations((file) => !file.startsWith('client/'), under('client/'))).toEqual([]);
  });

  it('only the entries import app.ts', () => {
    expect(
      violations(
        (file) => !file.startsWith('entries/'),
        (target) => target === 'app.ts',
      ),
    ).toEqual([]);
  });
});

/** A query builder call or a raw statement: SQL, which lives in db/. */
const SQL =
  /\.(selectFrom|insertInto|updateTable|deleteFrom|selectNoFrom)\(|\bsql`|import \{[^}]*\bsql\b[^}]*\} from 'kysely'/;
/**
 * Files outside db/ that still hold SQL while it moves to db/queries. Each
 * must STILL hold some (so the list cannot outlive the move); to be emptied.
 */
const STILL_SQL = new Set<string>();
/** Type names exported by two files while one of them is being removed; each must STILL collide. */
const STILL_COLLIDING = new Set<string>();

describe('one home per thing', () => {
  const texts = new Map([...graph.keys()].map((file) => [file, readFileSync(join(SRC, file), 'utf8')]));

  it('SQL only in db/', () => {
    const outside = [...texts].filter(([file, text]) => !file.startsWith('db/') && SQL.test(text)).map(([f]) => f);
    expect(outside.filter((file) => !STILL_SQL.has(file))).toEqual([]);
    expect([...STILL_SQL].filter((file) => !outside.includes(file))).toEqual([]);
  });

  it('the shared leaves know no HTTP framework (errors are rendered by middleware)', () => {
    // shared/types.ts names hono's Context for AppEnv, types only.
    expect(
      [...graph.keys()].filter(
        (file) => file.startsWith('shared/') && file !== 'shared/types.ts' && importsHonoAt(file),
      ),
    ).toEqual([]);
  });

  it('no two src files export a type of the same name', () => {
    const owners = new Map<string, string[]>();
    for (const [file, text] of texts) {
      if (file === 'client/schema.d.ts') continue;
      for (const [, name] of text.matchAll(/^export (?:interface|type|class|enum) (\w+)/gm))
        owners.set(name!, [...(owners.get(name!) ?? []), file]);
    }
    const colliding = [...owners].filter(([, files]) => files.length > 1).map(([name]) => name);
    expect(colliding.filter((name) => !STILL_COLLIDING.has(name))).toEqual([]);
    expect([...STILL_COLLIDING].filter((name) => !colliding.includes(name))).toEqual([]);
  });
});

/** The longest a src file may be, in lines (README "Contributing"). */
const MAX_LINES = 250;
/** Generated from the OpenAPI document (npm run client:generate), not read as code. */
const GENERATED = new Set(['client/schema.d.ts']);
/**
 * Files still over the limit while they are being split. Each must STILL be
 * over it (so the list cannot outlive the split); the list is to be emptied.
 */
const STILL_LONG = new Set<string>([]);

describe('file length', () => {
  const lines = new Map(
    files(SRC)
      .map((path) => relative(SRC, path))
      .filter((file) => !GENERATED.has(file))
      .map((file) => [file, readFileSync(join(SRC, file), 'utf8').split('\n').length - 1] as const),
  );

  it(`no src file is over ${MAX_LINES} lines`, () => {
    const long = [...lines].filter(([file, count]) => count > MAX_LINES && !STILL_LONG.has(file));
    expect(Object.fromEntries(long)).toEqual({});
  });

  it('every file excused from the limit is still over it', () => {
    const short = [...STILL_LONG].filter((file) => (lines.get(file) ?? 0) <= MAX_LINES);
    expect(short).toEqual([]);
  });
});
