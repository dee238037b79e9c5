import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { createNodeTxtResolver } from '../../../src/platform/dns-txt.js';
import type { TxtResolver } from '../../../src/platform/dns-txt-types.js';
import { clientIpFromForwardedFor } from '../../../src/shared/client-address.js';
import { createTestApp, type TestApp } from '../../support/app.js';

export interface ApiServer {
  t: TestApp;
  port: number;
  /** `http://localhost:<port>`: the host name the browser uses (same site as the SPA on localhost:3000). */
  url: string;
  close(): Promise<void>;
}

/**
 * The Node entry's composition (src/entries/server.ts: createApp behind
 * @hono/node-server, client address from x-forwarded-for or the socket) on a
 * real listener on 127.0.0.1. The port is taken first, since AUTH_URL (the
 * library's base URL, used in the verification link) must name it.
 */
export async function startApiServer(env: (port: number) => Record<string, string>): Promise<ApiServer> {
  let handler: ((request: Request, env: unknown) => Response | Promise<Response>) | null = null;
  const server: ServerType = serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch: (request, bindings) => (handler ? handler(request, bindings) : new Response('starting', { status: 503 })),
  });
  await new Promise<void>((ok, fail) => {
    if (server.listening) ok();
    server.once('listening', () => ok());
    server.once('error', fail);
  });
  const port = (server.address() as AddressInfo).port;
  const breakage = process.env.GATEHOUSE_E2E_BREAK ?? '';
  // The Node entry's TXT resolver (src/entries/server.ts): DNS_SERVERS, else the system's, once the config is parsed.
  let resolveTxt: TxtResolver | null = null;
  const t = await createTestApp({
    env: { ...env(port), ...breakConfig(breakage) },
    // A request through t.app.request (tests/support/http.ts) has no socket.
    clientIp: (c) =>
      clientIpFromForwardedFor(c.req.header('x-forwarded-for')) ?? (c.env ? getConnInfo(c).remote.address : null),
    resolveTxt: (name) => resolveTxt!(name),
  });
  resolveTxt = createNodeTxtResolver(t.config.dns.servers);
  const appUrl = t.config.auth.appUrl;
  handler = breakage
    ? async (request, bindings) =>
        breakResponse(breakage, request, await t.app.fetch(breakRequest(breakage, request, appUrl), bindings as object))
    : (request, bindings) => t.app.fetch(request, bindings as object);
  return {
    t,
    port,
    url: `http://localhost:${port}`,
    async close() {
      if ('closeAllConnections' in server) server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
      await t.close();
    },
  };
}

/**
 * A manual check that the browser suite catches what it claims to (its header
 * comment): `GATEHOUSE_E2E_BREAK=<mode> npm run test:e2e --
 * tests/e2e/browser.test.ts` must FAIL for every mode.
 * Never set in CI. Modes:
 *   cors-credentials  responses lose Access-Control-Allow-Credentials
 *   cors-origin       CORS_ORIGIN does not list the SPA's origin
 *   app-url           APP_URL (the auth library's trusted origin) is another origin
 *   cors-any-origin   every Origin is echoed back with credentials allowed
 *   trust-any-origin  the server takes any Origin for the trusted one (CSRF check off)
 *   httponly          Set-Cookie loses HttpOnly
 */
function breakConfig(mode: string): Record<string, string> {
  if (mode === 'cors-origin') return { CORS_ORIGIN: 'http://localhost:1' };
  if (mode === 'app-url') return { APP_URL: 'http://localhost:1' };
  return {};
}

function breakRequest(mode: string, request: Request, appUrl: string): Request {
  if (mode !== 'trust-any-origin' || !request.headers.get('origin')) return request;
  const headers = new Headers(request.headers);
  headers.set('origin', appUrl);
  return new Request(request, { headers });
}

function breakResponse(mode: string, request: Request, response: Response): Response {
  const headers = new Headers(response.headers);
  const origin = request.headers.get('origin');
  if (mode === 'cors-credentials') headers.delete('access-control-allow-credentials');
  else if (mode === 'cors-any-origin' && origin) {
    headers.set('access-control-allow-origin', origin);
    headers.set('access-control-allow-credentials', 'true');
    if (request.method === 'OPTIONS') {
      headers.set('access-control-allow-methods', 'GET,POST,PATCH,DELETE');
      headers.set('access-control-allow-headers', 'content-type');
    }
  } else if (mode === 'httponly') {
    const cookies = response.headers.getSetCookie();
    headers.delete('set-cookie');
    for (const cookie of cookies) headers.append('set-cookie', cookie.replace(/;\s*HttpOnly/gi, ''));
  } else return response;
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}
