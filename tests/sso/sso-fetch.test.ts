import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkedFetchJson,
  SSO_FETCH_MAX_BYTES,
  SSO_FETCH_TIMEOUT_MS,
  SsoFetchError,
  type SsoFetchPolicy,
} from '../../src/sso/fetch.js';

/**
 * docs/sso.md "Addresses": what the service lets an identity provider's
 * endpoint answer. Real HTTP servers on loopback; each counts the requests it
 * got, so a refusal is shown to happen before anything is sent.
 */
describe('checked fetch to identity providers', () => {
  const servers: Server[] = [];
  const hits = new Map<string, number>();
  let base = '';
  let elsewhere = '';
  const open: SsoFetchPolicy = { fetch, allowPrivateUrls: true, httpsOnly: false };

  const start = async (handler: RequestListener) => {
    const server = createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };

  beforeAll(async () => {
    elsewhere = await start((request, response) => {
      hits.set(`elsewhere${request.url}`, (hits.get(`elsewhere${request.url}`) ?? 0) + 1);
      response.end('{"reached":true}');
    });
    base = await start((request, response) => {
      const path = request.url ?? '';
      hits.set(path, (hits.get(path) ?? 0) + 1);
      if (path === '/json') return response.end('{"ok":true}');
      if (path === '/error') {
        response.writeHead(400, { 'content-type': 'application/json' });
        return response.end('{"error":"invalid_grant"}');
      }
      if (path === '/html') return response.end('<html>not json</html>');
      if (path === '/empty') {
        response.writeHead(204);
        return response.end();
      }
      if (path === '/redirect') {
        response.writeHead(302, { location: `${elsewhere}/target` });
        return response.end();
      }
      if (path === '/exactly-cap' || path === '/over-cap') {
        // Chunked, no Content-Length: the cap must count what arrives.
        const size = path === '/exactly-cap' ? SSO_FETCH_MAX_BYTES : SSO_FETCH_MAX_BYTES + 1;
        const chunk = ' '.repeat(16 * 1024);
        response.write('"');
        for (let sent = 2; sent < size; sent += chunk.length)
          response.write(chunk.slice(0, Math.min(chunk.length, size - sent)));
        return response.end('"');
      }
      if (path === '/no-length') {
        // No Content-Length, not chunked: a megabyte delimited by closing the connection.
        response.socket?.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n');
        response.socket?.end(`"${'x'.repeat(1024 * 1024)}"`);
        return;
      }
      if (path === '/silent') return; // never answers
      if (path === '/stalls') {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.write('{"partial":'); // then nothing more
        return;
      }
      response.writeHead(404);
      response.end();
    });
  });
  afterAll(async () => {
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  const refusal = async (promise: Promise<unknown>) => {
    const error = await promise.then(
      () => null,
      (caught: unknown) => caught,
    );
    expect(error).toBeInstanceOf(SsoFetchError);
    return (error as SsoFetchError).message;
  };

  it('answers the status and the parsed body', async () => {
    expect(await checkedFetchJson(`${base}/json`, open)).toEqual({ status: 200, body: { ok: true } });
    expect(await checkedFetchJson(`${base}/error`, open)).toEqual({ status: 400, body: { error: 'invalid_grant' } });
    expect(await refusal(checkedFetchJson(`${base}/html`, open))).toMatch(/200 without a JSON body/);
    expect(await refusal(checkedFetchJson(`${base}/empty`, open))).toMatch(/204 without a JSON body/);
  });

  it('refuses a redirect and does not follow it', async () => {
    expect(await refusal(checkedFetchJson(`${base}/redirect`, open))).toMatch(/redirect/);
    expect(hits.get('/redirect')).toBe(1);
    expect(hits.get('elsewhere/target')).toBeUndefined();
  });

  it('reads a body up to 256 KiB and no further, counted as it arrives', async () => {
    const atCap = await checkedFetchJson(`${base}/exactly-cap`, open);
    expect((atCap.body as string).length).toBe(SSO_FETCH_MAX_BYTES - 2);
    expect(await refusal(checkedFetchJson(`${base}/over-cap`, open))).toMatch(/more than 262144 bytes/);
    expect(await refusal(checkedFetchJson(`${base}/no-length`, open))).toMatch(/more than 262144 bytes/);
  });

  it('gives up after 5 seconds on a server that does not answer', async () => {
    const started = Date.now();
    expect(await refusal(checkedFetchJson(`${base}/silent`, open))).toMatch(/did not answer in time/);
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(SSO_FETCH_TIMEOUT_MS - 100);
    expect(waited).toBeLessThan(SSO_FETCH_TIMEOUT_MS + 3_000);
  });

  it('the timeout covers the body too', async () => {
    const started = Date.now();
    const stalled = checkedFetchJson(`${base}/stalls`, { ...open, timeoutMs: 500 });
    expect(await refusal(stalled)).toMatch(/did not answer in time/);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('https only: an http URL is refused before anything is sent', async () => {
    const before = hits.get('/json') ?? 0;
    expect(await refusal(checkedFetchJson(`${base}/json`, { ...open, httpsOnly: true }))).toMatch(/https:\/\//);
    expect(hits.get('/json') ?? 0).toBe(before);
  });

  it('private addresses: refused unless allowed, before anything is sent', async () => {
    const closed = { ...open, allowPrivateUrls: false };
    const before = hits.get('/json') ?? 0;
    expect(await refusal(checkedFetchJson(`${base}/json`, closed))).toMatch(/private address/);
    for (const url of [
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]/',
      'http://[::ffff:10.0.0.1]/',
      'http://localhost/',
    ])
      expect(await refusal(checkedFetchJson(url, closed))).toMatch(/private address/);
    expect(hits.get('/json') ?? 0).toBe(before);
  });

  it('a host name is resolved and every address it answers must be public', async () => {
    const sent: string[] = [];
    const policy = (addresses: string[]): SsoFetchPolicy => ({
      allowPrivateUrls: false,
      httpsOnly: true,
      resolve: async () => addresses,
      fetch: async (input) => {
        sent.push(String(input));
        return new Response('{"public":true}');
      },
    });
    const url = 'https://idp.example.com/.well-known/openid-configuration';
    expect(await refusal(checkedFetchJson(url, policy(['10.1.2.3'])))).toMatch(/private address/);
    expect(await refusal(checkedFetchJson(url, policy(['93.184.215.14', '127.0.0.1'])))).toMatch(/private address/);
    expect(await refusal(checkedFetchJson(url, policy([])))).toMatch(/does not resolve/);
    expect(sent).toEqual([]);
    expect(await checkedFetchJson(url, policy(['93.184.215.14']))).toEqual({ status: 200, body: { public: true } });
    expect(sent).toEqual([url]);
  });

  it('refuses credentials in the URL and names no query string in its messages', async () => {
    expect(await refusal(checkedFetchJson(`http://user:pass@127.0.0.1:1/`, open))).toMatch(/credentials/);
    const message = await refusal(checkedFetchJson(`${base}/redirect?code=secret-code`, open));
    expect(message).not.toContain('secret-code');
  });
});
