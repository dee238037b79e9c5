/**
 * Requests the app never sees (refused by Node's HTTP
 * parser, or by the Node adapter before it calls the app) answer in the
 * contract's shape (docs/api.md "Errors") with the security headers of every
 * response (docs/api.md "Security headers") and an `X-Request-Id`, over a real listener with the Node
 * entry's client-error handling.
 */

import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerClientErrors, LISTENER_OPTIONS } from '../../src/entries/node-listener.js';
import { DEFAULT_CSP_HOSTS, securityHeaderValues } from '../../src/middleware/security-headers.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { UUID_V4 } from '../support/http.js';
import { parseResponses, type RawResponse, rawExchange } from '../support/raw-http.js';

describe("the listener's own answers", () => {
  let t: TestApp;
  let server: ServerType;
  let port: number;

  beforeAll(async () => {
    t = await createTestApp();
    server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1', serverOptions: { ...LISTENER_OPTIONS } });
    answerClientErrors(server, { csp: t.config.csp });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => {
      if ('closeAllConnections' in server) server.closeAllConnections();
      server.close(() => resolve());
    });
    await t.close();
  });

  async function exchange(payload: string): Promise<{ responses: RawResponse[]; closedByServer: boolean }> {
    const { bytes, closedByServer } = await rawExchange(port, payload, { waitMs: 3000 });
    return { responses: parseResponses(bytes), closedByServer };
  }

  function expectContract(res: RawResponse | undefined, status: number, code: string) {
    expect(res?.status).toBe(status);
    expect(res!.headers['content-type']).toMatch(/^application\/json/);
    expect(JSON.parse(res!.body)).toEqual({ code, message: expect.any(String) });
    for (const [name, value] of Object.entries(securityHeaderValues(t.config.csp)))
      expect(res!.headers[name.toLowerCase()], name).toBe(value);
    expect(res!.headers['cross-origin-embedder-policy']).toBeUndefined();
    expect(res!.headers['x-request-id']).toMatch(UUID_V4);
  }

  it('the listener answers the same table the middleware sends', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/api/health`);
    expect(res.status).toBe(200);
    for (const [name, value] of Object.entries(securityHeaderValues(t.config.csp)))
      expect(res.headers.get(name), name).toBe(value);
    expect(t.config.csp).toEqual(DEFAULT_CSP_HOSTS);
  });

  const cases: [string, string][] = [
    ['a backslash in the path', 'GET /api\\health HTTP/1.1\r\nHost: localhost\r\n\r\n'],
    ['a backslash after a segment', 'GET /api/users/me\\..\\..\\health HTTP/1.1\r\nHost: localhost\r\n\r\n'],
    ['a Host with a space', 'GET /api/health HTTP/1.1\r\nHost: exa mple\r\n\r\n'],
    ['a Host with a path', 'GET /api/health HTTP/1.1\r\nHost: evil.example/x\r\n\r\n'],
    ['a Host with an impossible port', 'GET /api/health HTTP/1.1\r\nHost: localhost:99999\r\n\r\n'],
    ['a Host with an unclosed IPv6 bracket', 'GET /api/health HTTP/1.1\r\nHost: [::1\r\n\r\n'],
    ['an asterisk request target', 'GET * HTTP/1.1\r\nHost: localhost\r\n\r\n'],
    ['an HTTP/1.1 request without Host', 'GET /api/health HTTP/1.1\r\n\r\n'],
    ['bytes that are not HTTP', 'HELLO\r\n\r\n'],
    [
      'Content-Length with Transfer-Encoding',
      'POST /api/health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    ],
  ];
  for (const [label, payload] of cases) {
    it(`${label}: 400 VALIDATION_ERROR in the contract's shape, security headers, X-Request-Id, connection closed`, async () => {
      const { responses, closedByServer } = await exchange(payload);
      expect(responses).toHaveLength(1);
      expectContract(responses[0], 400, 'VALIDATION_ERROR');
      expect(responses[0]!.headers.connection).toBe('close');
      expect(closedByServer).toBe(true);
    });
  }

  it('a header block over 16 KiB: 431 in the same shape', async () => {
    const { responses } = await exchange(
      `GET /api/health HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(32 * 1024)}\r\n\r\n`,
    );
    expectContract(responses[0], 431, 'VALIDATION_ERROR');
  });

  it('each answer has its own request id', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++)
      ids.add(
        (await exchange('GET /api\\health HTTP/1.1\r\nHost: localhost\r\n\r\n')).responses[0]!.headers['x-request-id']!,
      );
    expect(ids.size).toBe(3);
  });

  it("the app's own answers are untouched (a 404 and a 200 with a valid Host), and the listener serves on", async () => {
    const { responses } = await exchange('GET /api/nope HTTP/1.1\r\nHost: localhost:4000\r\nConnection: close\r\n\r\n');
    expect(responses[0]?.status).toBe(404);
    expect(JSON.parse(responses[0]!.body)).toEqual({ code: 'NOT_FOUND', message: 'Not found' });
    const ok = await exchange('GET /api/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    expect(ok.responses[0]?.status).toBe(200);
    expect(JSON.parse(ok.responses[0]!.body)).toEqual({ status: 'ok' });
  });
});
