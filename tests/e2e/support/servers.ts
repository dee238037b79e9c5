import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
/** The hostile page of the browser suite (an origin the API does not trust). */
export const HOSTILE_DIR = join(REPO_ROOT, 'tests/e2e/hostile');
/** Where the browser suites save a screenshot of each screen (.ci/run points it into its artifacts folder). */
export const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR ?? join(REPO_ROOT, 'screenshots');

/** Listens on host:port (0 = any free port); resolves with the port, rejects on EADDRINUSE. */
export function listen(server: Server, port: number, host = '127.0.0.1'): Promise<number> {
  return new Promise((ok, fail) => {
    const onError = (error: Error) => {
      server.off('listening', onListening);
      fail(error);
    };
    const onListening = () => {
      server.off('error', onError);
      ok((server.address() as AddressInfo).port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

/**
 * The preferred port when it is free, else any free one: another engineer's
 * dev server on 3000 must not fail the suite. The caller builds APP_URL from
 * the port it got.
 */
export async function listenPreferring(server: Server, preferred: number, host = '127.0.0.1'): Promise<number> {
  try {
    return await listen(server, preferred, host);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    console.warn(`[e2e] port ${preferred} is busy; using a free port instead`);
    return listen(server, 0, host);
  }
}

export function closeServer(server: Server | undefined): Promise<void> {
  if (!server?.listening) return Promise.resolve();
  server.closeAllConnections?.();
  return new Promise((ok) => server.close(() => ok()));
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.png': 'image/png',
};

/**
 * A tiny static server for the hostile page's folder, plus `/config.js`
 * telling the page where the API is.
 */
export async function startStaticServer(options: { port: number; host?: string; apiUrl: () => string }) {
  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://static').pathname;
    if (path === '/config.js') {
      res.writeHead(200, { 'content-type': TYPES['.js']!, 'cache-control': 'no-store' });
      res.end(`window.GATEHOUSE_API = ${JSON.stringify(options.apiUrl())};\n`);
      return;
    }
    const file = normalize(join(HOSTILE_DIR, path === '/' ? 'untrusted.html' : path));
    if (!file.startsWith(HOSTILE_DIR) || !existsSync(file)) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found');
      return;
    }
    res.writeHead(200, {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'cache-control': 'no-store',
    });
    res.end(await readFile(file));
  });
  const port = await listenPreferring(server, options.port, options.host);
  return { server, port, close: () => closeServer(server) };
}

export interface CapturedEmail {
  from: string;
  to: string | string[];
  subject: string;
  html?: string;
  text?: string;
}

/**
 * Stands in for Resend: records `POST /emails` bodies (with the bearer token
 * it was sent) and answers `{ id }` as the provider does.
 */
export async function startMailCapture() {
  const emails: (CapturedEmail & { authorization: string | undefined })[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method === 'POST' && new URL(req.url ?? '/', 'http://mail').pathname === '/emails') {
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as CapturedEmail;
          emails.push({ ...body, authorization: req.headers.authorization });
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ id: `captured-${emails.length}` }));
        } catch {
          res.writeHead(422, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ name: 'validation_error', message: 'not JSON', statusCode: 422 }));
        }
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ name: 'not_found', message: 'Not found', statusCode: 404 }));
    });
  });
  const port = await listen(server, 0);
  return { url: `http://127.0.0.1:${port}`, emails, close: () => closeServer(server) };
}

/** The first http(s) link of a mail (the verification link). */
export function firstLink(text: string): string {
  const match = /https?:\/\/[^\s"'<>)]+/.exec(text);
  if (!match) throw new Error(`no link in: ${text}`);
  return match[0].replaceAll('&amp;', '&');
}

/**
 * swagger-ui-dist, which `/api/docs` loads from the CDN. It is not one of the
 * project's dependencies (@hono/swagger-ui only links to the CDN): `.ci/e2e.sh`
 * fetches a pinned, integrity-checked copy into node_modules/.cache when
 * node_modules has none.
 */
export function swaggerUiDist(): string | null {
  const candidates = [
    process.env.SWAGGER_UI_DIST,
    join(REPO_ROOT, 'node_modules/swagger-ui-dist'),
    join(REPO_ROOT, 'node_modules/.cache/gatehouse-e2e/swagger-ui-dist'),
  ];
  return candidates.find((dir) => dir && existsSync(join(dir, 'swagger-ui-bundle.js'))) ?? null;
}

/** The preferred port on loopback if nothing listens there now, else a free one (then released). */
export async function freePortPreferring(preferred: number): Promise<number> {
  const probe = createServer();
  const port = await listenPreferring(probe, preferred);
  await closeServer(probe);
  return port;
}
