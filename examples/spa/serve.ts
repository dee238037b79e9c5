// `npm run example`: builds the example SPA with esbuild and serves it on
// http://localhost:3000 (the API's default APP_URL and CORS_ORIGIN), talking
// to the API that `npm start` serves on http://localhost:4000. esbuild
// rebuilds on the next request after a source changes.
//
//   GATEHOUSE_API_URL  where the API is (default http://localhost:4000)
//   EXAMPLE_PORT       the page's port (default 3000; the API's APP_URL and CORS_ORIGIN must name it)
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { context } from 'esbuild';

const HERE = import.meta.dirname;

export interface ExampleServer {
  /** `http://localhost:<port>`: the origin the API must trust (APP_URL, CORS_ORIGIN). */
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startExample({ apiUrl, port = 3000 }: { apiUrl: string; port?: number }): Promise<ExampleServer> {
  const build = await context({
    entryPoints: [join(HERE, 'src/main.ts')],
    outfile: join(HERE, 'public/app.js'),
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    sourcemap: true,
    logLevel: 'warning',
    // The package's own `gatehouse/client` export, from source (an app would import the published package).
    alias: { 'gatehouse/client': join(HERE, '../../src/client/index.ts') },
    define: { GATEHOUSE_API_URL: JSON.stringify(apiUrl.replace(/\/+$/, '')) },
  });
  try {
    // Loopback only. The bundle lands in public/app.js (git-ignored) beside index.html and style.css.
    const served = await build.serve({ servedir: join(HERE, 'public'), host: '127.0.0.1', port });
    return { url: `http://localhost:${served.port}`, port: served.port, close: () => build.dispose() };
  } catch (error) {
    await build.dispose();
    throw error;
  }
}

async function main(): Promise<void> {
  const apiUrl = process.env.GATEHOUSE_API_URL ?? 'http://localhost:4000';
  const example = await startExample({ apiUrl, port: Number(process.env.EXAMPLE_PORT ?? 3000) });
  console.log(`Example SPA on ${example.url} against the API at ${apiUrl}`);
  const health = await fetch(`${apiUrl}/api/health`).catch(() => null);
  if (!health?.ok) console.log(`The API does not answer at ${apiUrl}/api/health yet: start it with \`npm start\`.`);
  const stop = () => void example.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
