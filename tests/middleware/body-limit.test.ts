import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { z } from '@hono/zod-openapi';
import { Hono } from 'hono';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { bodyLimit, MAX_BODY_BYTES, REFUSED_BODY_DRAIN } from '../../src/middleware/body-limit.js';
import { access, guard } from '../../src/middleware/guard.js';
import { renderError } from '../../src/middleware/render-error.js';
import { createRouter, defineRoute } from '../../src/router.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { rawExchange } from '../support/raw-http.js';

const LIMIT = 1_048_576;

const EchoBody = z.object({ name: z.string(), tags: z.array(z.string()).optional() }).strict();
const echoRoute = defineRoute({
  method: 'post',
  path: '/api/test/echo',
  access: access.public(),
  request: { body: { content: { 'application/json': { schema: EchoBody } } } },
  responses: {
    200: {
      description: 'what the handler saw',
      content: { 'application/json': { schema: z.object({ nameLength: z.number() }) } },
    },
  },
});

/** A JSON document of exactly `bytes` bytes that the echo route accepts. */
function jsonOfSize(bytes: number): Buffer {
  const overhead = Buffer.byteLength('{"name":""}');
  return Buffer.from(`{"name":"${'a'.repeat(bytes - overhead)}"}`);
}

interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** POST with Transfer-Encoding: chunked (no Content-Length), written in 64 KiB chunks. */
function postChunked(port: number, path: string, body: Buffer): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          settled = true;
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', (error) => {
          if (!settled) reject(error);
        });
      },
    );
    // The server may answer 413 and close before the upload ends: a write error after the answer is expected.
    req.on('error', (error) => {
      if (!settled) reject(error);
    });
    expect(req.getHeader('content-length')).toBeUndefined();
    const step = 64 * 1024;
    for (let offset = 0; offset < body.length; offset += step) req.write(body.subarray(offset, offset + step));
    req.end();
  });
}

const statusOf = (raw: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0);

describe('body limit (docs/api.md "Bodies")', () => {
  let t: TestApp;
  let server: ServerType;
  let port: number;
  /** Every call the handlers saw, with the size of the body they were given. */
  const echoCalls: number[] = [];
  const rawCalls: number[] = [];

  beforeAll(async () => {
    t = await createTestApp();
    t.app.route(
      '/',
      createRouter().openapi(echoRoute, (c) => {
        const body = c.req.valid('json');
        echoCalls.push(body.name.length);
        return c.json({ nameLength: body.name.length }, 200);
      }),
    );
    t.app.post('/api/test/raw', guard(access.public()), async (c) => {
      const bytes = (await c.req.arrayBuffer()).byteLength;
      rawCalls.push(bytes);
      return c.json({ bytes });
    });
    port = await new Promise<number>((resolve) => {
      server = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, (info: AddressInfo) => resolve(info.port));
    });
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => {
      if ('closeAllConnections' in server) server.closeAllConnections();
      server.close(() => resolve());
    });
    await t.close();
  });
  beforeEach(() => {
    echoCalls.length = 0;
    rawCalls.length = 0;
  });

  it('is 1 MiB', () => {
    expect(MAX_BODY_BYTES).toBe(LIMIT);
  });

  describe('over a real listener', () => {
    it('answers 413 to a chunked body of 1,048,577 bytes, and the handler never runs', async () => {
      const body = jsonOfSize(LIMIT + 1);
      expect(body.length).toBe(1_048_577);
      const res = await postChunked(port, '/api/test/echo', body);
      expect(res.status).toBe(413);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(JSON.parse(res.body)).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) });
      expect(res.headers['x-request-id']).toBeTruthy();
      expect(echoCalls).toEqual([]);
    });

    it('answers 413 to a much larger chunked body too', async () => {
      const res = await postChunked(port, '/api/test/raw', Buffer.alloc(3 * LIMIT, 0x61));
      expect(res.status).toBe(413);
      expect(JSON.parse(res.body)).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
      expect(rawCalls).toEqual([]);
    });

    it('accepts a chunked body of exactly 1,048,576 bytes', async () => {
      const body = jsonOfSize(LIMIT);
      expect(body.length).toBe(LIMIT);
      const res = await postChunked(port, '/api/test/echo', body);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual({ nameLength: LIMIT - 11 });
      expect(echoCalls).toEqual([LIMIT - 11]);
    });

    it('accepts exactly 1,048,576 bytes with a Content-Length', async () => {
      const res = await fetch(`http://127.0.0.1:${port}/api/test/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: new Uint8Array(jsonOfSize(LIMIT)),
      });
      expect(res.status).toBe(200);
      expect(echoCalls).toEqual([LIMIT - 11]);
    });

    it('answers 413 to a Content-Length over the limit without waiting for the body', async () => {
      // Only the head is sent: the answer can only come from the announced length.
      const head = Buffer.from(
        'POST /api/test/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
          `Content-Length: ${LIMIT + 1}\r\n\r\n`,
      );
      const started = Date.now();
      const raw = (await rawExchange(port, head, { waitMs: 5000 })).bytes.toString('latin1');
      expect(statusOf(raw)).toBe(413);
      expect(Date.now() - started).toBeLessThan(4000);
      expect(raw).toContain('"code":"PAYLOAD_TOO_LARGE"');
      expect(echoCalls).toEqual([]);
    });

    describe('a 413 on a keep-alive connection', () => {
      /** One request on `agent`; resolves with the answer, or with the error the client saw. */
      function send(
        agent: Agent,
        method: string,
        path: string,
        body?: Buffer,
        headers: Record<string, string> = {},
      ): Promise<HttpResult & { socket: unknown }> {
        return new Promise((resolve, reject) => {
          let settled = false;
          const req = httpRequest(
            {
              host: '127.0.0.1',
              port,
              path,
              method,
              agent,
              headers: {
                ...headers,
                ...(body ? { 'content-type': 'application/json', 'content-length': String(body.length) } : {}),
              },
            },
            (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (chunk: Buffer) => chunks.push(chunk));
              res.on('end', () => {
                settled = true;
                resolve({
                  status: res.statusCode ?? 0,
                  headers: res.headers,
                  body: Buffer.concat(chunks).toString('utf8'),
                  socket: req.socket,
                });
              });
              res.on('error', (error) => {
                if (!settled) reject(error);
              });
            },
          );
          req.on('error', (error) => {
            if (!settled) reject(error);
          });
          if (body) req.write(body);
          req.end();
        });
      }

      for (const [label, size] of [
        ['just over the limit', LIMIT + 1],
        ['several MiB', 6 * LIMIT],
      ] as const) {
        it(`${label}: the 413 says Connection: close, and the next request from the same pooled agent is answered`, async () => {
          const agent = new Agent({ keepAlive: true, maxSockets: 1 });
          try {
            const warm = await send(agent, 'GET', '/api/health');
            expect(warm.status).toBe(200);
            const refused = await send(agent, 'POST', '/api/test/raw', Buffer.alloc(size, 0x61));
            expect(refused.status).toBe(413);
            expect(refused.headers.connection).toBe('close');
            expect(JSON.parse(refused.body)).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) });
            expect(refused.socket).toBe(warm.socket);
            // The agent must not hand the closed socket to the next request.
            for (let i = 0; i < 3; i++) {
              const next = await send(agent, 'GET', '/api/health');
              expect(next.status).toBe(200);
              expect(JSON.parse(next.body)).toEqual({ status: 'ok' });
            }
            const small = await send(agent, 'POST', '/api/test/raw', Buffer.from('{}'));
            expect(small.status).toBe(200);
            expect(rawCalls).toEqual([2]);
          } finally {
            agent.destroy();
          }
        });
      }

      it('a 413 to a chunked upload closes the connection as well, and the agent carries on', async () => {
        const agent = new Agent({ keepAlive: true, maxSockets: 1 });
        try {
          const refused = await new Promise<HttpResult>((resolve, reject) => {
            let settled = false;
            const req = httpRequest(
              {
                host: '127.0.0.1',
                port,
                path: '/api/test/raw',
                method: 'POST',
                agent,
                headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
              },
              (res) => {
                const chunks: Buffer[] = [];
                res.on('data', (chunk: Buffer) => chunks.push(chunk));
                res.on('end', () => {
                  settled = true;
                  resolve({
                    status: res.statusCode ?? 0,
                    headers: res.headers,
                    body: Buffer.concat(chunks).toString('utf8'),
                  });
                });
              },
            );
            req.on('error', (error) => {
              if (!settled) reject(error);
            });
            const chunk = Buffer.alloc(64 * 1024, 0x61);
            for (let sent = 0; sent < 2 * LIMIT; sent += chunk.length) req.write(chunk);
            req.end();
          });
          expect(refused.status).toBe(413);
          expect(refused.headers.connection).toBe('close');
          const next = await send(agent, 'GET', '/api/health');
          expect(next.status).toBe(200);
        } finally {
          agent.destroy();
        }
      });
    });

    it('never hands a handler more bytes than a low Content-Length announces', async () => {
      const extra = Buffer.alloc(LIMIT + 4096, 0x62);
      const payload = Buffer.concat([
        Buffer.from(
          'POST /api/test/raw HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nContent-Length: 10\r\n\r\n',
        ),
        Buffer.from('0123456789'),
        extra,
      ]);
      const raw = (await rawExchange(port, payload, { waitMs: 3000 })).bytes.toString('latin1');
      // Node's parser hands over the announced 10 bytes and reads the rest as a
      // garbage next request, which it answers 400 (often before our 200 is written).
      expect([200, 400]).toContain(statusOf(raw));
      expect(rawCalls.length).toBeLessThanOrEqual(1);
      expect(rawCalls.every((bytes) => bytes <= 10)).toBe(true);
      expect(raw).not.toMatch(/"bytes":(1[1-9]|[2-9]\d|\d{3,})/);
      expect(raw).not.toContain('PAYLOAD_TOO_LARGE');
    });

    it('the same for a JSON route: the extra bytes never reach validation as body', async () => {
      const announced = Buffer.from('{"name":"a"}');
      const payload = Buffer.concat([
        Buffer.from(
          `POST /api/test/echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${announced.length}\r\n\r\n`,
        ),
        announced,
        Buffer.from(`,"tags":["${'c'.repeat(LIMIT)}"]}`),
      ]);
      const raw = (await rawExchange(port, payload, { waitMs: 3000 })).bytes.toString('latin1');
      expect([200, 400]).toContain(statusOf(raw));
      // At most the announced document `{"name":"a"}` was validated; the trailing `tags` never was.
      expect(echoCalls.length).toBeLessThanOrEqual(1);
      expect(echoCalls.every((nameLength) => nameLength === 1)).toBe(true);
    });
  });

  describe('JSON routes (docs/api.md "Conventions")', () => {
    const post = (body: string, contentType: string | null = 'application/json') =>
      t.app.request('/api/test/echo', {
        method: 'POST',
        headers: contentType ? { 'content-type': contentType } : {},
        body,
      });

    it('answers 415 UNSUPPORTED_MEDIA_TYPE to a non-JSON content type, before the handler', async () => {
      for (const type of [
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/jsonp',
      ]) {
        const res = await post('{"name":"a"}', type);
        expect(res.status, type).toBe(415);
        expect(await res.json()).toEqual({ code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.any(String) });
      }
      expect(echoCalls).toEqual([]);
    });

    it('accepts application/json with a charset and +json types', async () => {
      expect((await post('{"name":"a"}', 'application/json; charset=utf-8')).status).toBe(200);
      expect((await post('{"name":"b"}', 'application/merge-patch+json')).status).toBe(200);
      expect(echoCalls).toEqual([1, 1]);
    });

    it('answers 400 VALIDATION_ERROR to malformed JSON', async () => {
      const res = await post('{"name": "a",');
      expect(res.status).toBe(400);
      const body = (await res.json()) as { code: string; message: string };
      expect(body).toMatchObject({ code: 'VALIDATION_ERROR', message: expect.any(String) });
      expect(JSON.stringify(body)).not.toMatch(/SyntaxError|at JSON\.parse|\n\s+at /);
      expect(echoCalls).toEqual([]);
    });

    it('answers 400 VALIDATION_ERROR with details to an unknown body field', async () => {
      const res = await post(JSON.stringify({ name: 'a', isAdmin: true }));
      expect(res.status).toBe(400);
      const body = (await res.json()) as { code: string; details: { path: string; message: string }[] };
      expect(body.code).toBe('VALIDATION_ERROR');
      expect(body.details).toEqual(
        expect.arrayContaining([expect.objectContaining({ message: expect.stringContaining('isAdmin') })]),
      );
      expect(echoCalls).toEqual([]);
    });

    it('answers 400 VALIDATION_ERROR with the path of a wrong type', async () => {
      const res = await post(JSON.stringify({ name: 'a', tags: ['ok', 7] }));
      expect(res.status).toBe(400);
      const body = (await res.json()) as { code: string; details: { path: string; message: string }[] };
      expect(body.code).toBe('VALIDATION_ERROR');
      expect(body.details).toContainEqual({ path: 'tags.1', message: expect.any(String) });
    });

    it('answers 200 to a valid body', async () => {
      const res = await post(JSON.stringify({ name: 'hello', tags: ['x'] }));
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ nameLength: 5 });
      expect(echoCalls).toEqual([5]);
    });

    it('answers 413 through app.request as well (body streamed without a length)', async () => {
      const res = await post(jsonOfSize(LIMIT + 1).toString());
      expect(res.status).toBe(413);
      expect(await res.json()).toEqual({ code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) });
      expect(echoCalls).toEqual([]);
    });
  });

  describe('what is left of a refused chunked body (workerd drops the connection of a half-read one)', () => {
    const CHUNK = 64 * 1024;

    /** A body of `chunks` chunks without a length; counts what was read, and whether it was cancelled. */
    function countedBody(chunks: number | 'endless', { stallAfter }: { stallAfter?: number } = {}) {
      const seen = { pulled: 0, cancelled: false, closed: false };
      const stream = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (stallAfter !== undefined && seen.pulled >= stallAfter) return new Promise<void>(() => {});
          if (chunks !== 'endless' && seen.pulled >= chunks) {
            seen.closed = true;
            controller.close();
            return;
          }
          seen.pulled += 1;
          controller.enqueue(new Uint8Array(CHUNK));
        },
        cancel() {
          seen.cancelled = true;
        },
      });
      return { stream, seen };
    }

    /** The middleware alone, errors rendered as the app renders them. */
    function limited(drain?: { bytes: number; ms: number }) {
      const app = new Hono();
      app.use(bodyLimit(drain ? { drain } : {}));
      app.post('/', (c) => c.text('handled'));
      app.onError((error, c) => renderError(error, c as never));
      return (body: ReadableStream<Uint8Array>) =>
        app.request('/', { method: 'POST', body, duplex: 'half' } as RequestInit);
    }

    it('reads a 2 MiB body to its end before the 413', async () => {
      const { stream, seen } = countedBody(32);
      const res = await limited()(stream);
      expect(res.status).toBe(413);
      expect(await res.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
      expect(seen).toEqual({ pulled: 32, cancelled: false, closed: true });
    });

    it(`stops after ${REFUSED_BODY_DRAIN.bytes} more bytes and cancels the rest`, async () => {
      const { stream, seen } = countedBody('endless');
      const res = await limited()(stream);
      expect(res.status).toBe(413);
      expect(seen.cancelled).toBe(true);
      const read = seen.pulled * CHUNK;
      expect(read).toBeGreaterThan(LIMIT + REFUSED_BODY_DRAIN.bytes);
      expect(read).toBeLessThan(LIMIT + REFUSED_BODY_DRAIN.bytes + 64 * CHUNK);
    });

    it('answers a body that stalls after the limit once the drain time is up, and cancels it', async () => {
      const { stream, seen } = countedBody('endless', { stallAfter: 20 });
      const started = Date.now();
      const res = await limited({ bytes: REFUSED_BODY_DRAIN.bytes, ms: 200 })(stream);
      expect(res.status).toBe(413);
      expect(Date.now() - started).toBeGreaterThanOrEqual(150);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(seen).toMatchObject({ pulled: 20, cancelled: true });
    });

    it('hands an accepted chunked body on whole', async () => {
      const { stream } = countedBody(16);
      const app = new Hono();
      app.use(bodyLimit());
      app.post('/', async (c) => c.json({ bytes: (await c.req.arrayBuffer()).byteLength }));
      const res = await app.request('/', { method: 'POST', body: stream, duplex: 'half' } as RequestInit);
      expect(await res.json()).toEqual({ bytes: LIMIT });
    });
  });
});
