// `npm run build`: the Node entry compiled to dist/node/server.js (one ES
// module; packages stay in node_modules, so PGlite's WebAssembly and data
// files load from where they are), and the typed client to
// dist/client/index.js (`gatehouse/client`). `npm start` runs it, building first when it is missing
// or older than any source (scripts/start.mjs). The Worker has its own build
// (`npm run build:worker`).
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
export const OUTFILE = join(ROOT, 'dist', 'node', 'server.js');
/** `gatehouse/client` (package.json exports): the typed client, for SPAs and scripts. */
const CLIENT_OUTFILE = join(ROOT, 'dist', 'client', 'index.js');
/** What the build reads: a change to any of these makes dist/node stale. */
const INPUTS = ['src', 'migrations', 'package-lock.json', 'tsconfig.json', 'scripts/build.mjs'];

function newestMtime(path) {
  const info = statSync(path, { throwIfNoEntry: false });
  if (!info) return 0;
  if (!info.isDirectory()) return info.mtimeMs;
  let newest = info.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

/** Why dist/node must be (re)built, or null when it is current. */
export function staleReason() {
  const built = statSync(OUTFILE, { throwIfNoEntry: false })?.mtimeMs;
  if (built === undefined) return 'no build yet';
  const changed = INPUTS.find((input) => newestMtime(join(ROOT, input)) > built);
  return changed ? `${changed} changed since the last build` : null;
}

export async function build() {
  const { build: esbuild } = await import('esbuild');
  const started = performance.now();
  const common = { absWorkingDir: ROOT, bundle: true, packages: 'external', format: 'esm', logLevel: 'warning' };
  await Promise.all([
    esbuild({
      ...common,
      entryPoints: ['src/entries/server.ts'],
      outfile: OUTFILE,
      platform: 'node',
      target: 'node20.19',
      sourcemap: 'linked',
    }),
    esbuild({ ...common, entryPoints: ['src/client/index.ts'], outfile: CLIENT_OUTFILE, platform: 'neutral' }),
  ]);
  return { file: relative(ROOT, OUTFILE), ms: Math.round(performance.now() - started) };
}

if (import.meta.filename === process.argv[1]) {
  const { file, ms } = await build();
  console.log(JSON.stringify({ event: 'build.done', file, ms }));
}
