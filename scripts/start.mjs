// `npm start`: the compiled server (dist/node/server.js), built first when it
// is missing or older than a source, so `npm ci && npm start` just works.
// `npm run dev` runs the TypeScript through tsx and restarts on change.
import { pathToFileURL } from 'node:url';
import { build, OUTFILE, staleReason } from './build.mjs';

const reason = staleReason();
if (reason) {
  console.log(JSON.stringify({ time: new Date().toISOString(), level: 'info', event: 'build.start', reason }));
  const { file, ms } = await build();
  console.log(JSON.stringify({ time: new Date().toISOString(), level: 'info', event: 'build.done', file, ms }));
}
await import(pathToFileURL(OUTFILE).href);
