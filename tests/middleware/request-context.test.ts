import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { LIBRARY_ROUTES } from '../../src/library/routes.js';
import { access, guard } from '../../src/middleware/guard.js';
import { createLogger, createMemoryLogger, type LogLevel } from '../../src/shared/logger.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { APP_ORIGIN, UUID_V4 } from '../support/http.js';
import { createOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

describe('request id and access log', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
    t.app.get('/api/test/request-id', guard(access.public()), (c) => c.json({ requestId: c.get('requestId') }));
    t.app.get('/api/test/log', guard(access.public()), (c) => {
      c.get('logger').info('test.inside', { note: 'from a handler' });
      return c.json({ ok: true });
    });
  });
  afterAll(() => t.close());
  beforeEach(() => {
    t.logger.lines.length = 0;
  });

  const accessLines = () => t.logger.lines.filter((line) => line.event === 'request');

  describe('X-Request-Id', () => {
    it('is generated as a UUID v4 when the client sends none, and is the id the handlers see', async () => {
      const a = await t.app.request('/api/test/request-id');
      const b = await t.app.request('/api/test/request-id');
      const idA = a.headers.get('x-request-id');
      expect(idA).toMatch(UUID_V4);
      expect(b.headers.get('x-request-id')).toMatch(UUID_V4);
      expect(b.headers.get('x-request-id')).not.toBe(idA);
      expect(await a.json()).toEqual({ requestId: idA });
    });

    it('is on every response: 404 and health', async () => {
      expect((await t.app.request('/api/nowhere')).headers.get('x-request-id')).toMatch(UUID_V4);
      expect((await t.app.request('/api/health')).headers.get('x-request-id')).toMatch(UUID_V4);
    });

    it('echoes a well-formed id from the client', async () => {
      for (const id of ['abc-123', 'trace_ABC=', '0f6c1a2e-8f0e-4c3b-9a55-3a2b1c0d9e8f', 'x'.repeat(128)]) {
        const res = await t.app.request('/api/test/request-id', { headers: { 'X-Request-Id': id } });
        expect(res.headers.get('x-request-id')).toBe(id);
        expect(await res.json()).toEqual({ requestId: id });
      }
    });

    it('replaces a malformed id with a fresh UUID', async () => {
      const malformed = [
        'has spaces in it',
        '<script>alert(1)</script>',
        'x'.repeat(129),
        'a;b',
        'line\tbreak',
        '../../etc/passwd',
        'ünïcode',
      ];
      for (const id of malformed) {
        const res = await t.app.request('/api/test/request-id', { headers: { 'X-Request-Id': id } });
        const echoed = res.headers.get('x-request-id');
        expect(echoed, id).toMatch(UUID_V4);
        expect(await res.json()).toEqual({ requestId: echoed });
      }
      // The rejected value never reaches the log either.
      expect(JSON.stringify(t.logger.lines)).not.toContain('<script>');
    });
  });

  describe('X-Request-Id on every answer of every door', () => {
    /** A request as given, with a client-chosen id: the answer must echo it, whatever produced the answer. */
    const ask = (path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) =>
      t.app.request(path, { ...init, headers: { ...init.headers, 'x-request-id': 'door-check' } });

    it("on every library route's answer, anonymous and signed in, with and without an Origin", async () => {
      const owner = await signedInUser(t);
      await createOrganization(t, owner);
      const problems: string[] = [];
      let answers = 0;
      for (const route of LIBRARY_ROUTES) {
        const path = `/api/auth${route.path.replace(/:\w+/g, 'x')}`;
        for (const cookie of [undefined, owner.jar.header()]) {
          for (const origin of [undefined, APP_ORIGIN]) {
            const headers: Record<string, string> = {
              ...(cookie ? { cookie } : {}),
              ...(origin ? { origin } : {}),
              ...(route.method === 'POST' ? { 'content-type': 'application/json' } : {}),
            };
            // Sign-out and the revocations would end the session the next requests use.
            if (cookie && /sign-out|revoke|delete|leave/.test(route.path)) continue;
            const res = await ask(path, {
              method: route.method,
              headers,
              body: route.method === 'POST' ? '{}' : undefined,
            });
            answers += 1;
            if (res.headers.get('x-request-id') !== 'door-check')
              problems.push(
                `${route.method} ${path} (${cookie ? 'session' : 'anonymous'}, ${origin ? 'Origin' : 'no Origin'}): ${res.status}, X-Request-Id ${res.headers.get('x-request-id')}`,
              );
          }
        }
      }
      expect(answers).toBeGreaterThan(LIBRARY_ROUTES.length * 2);
      expect(problems).toEqual([]);
    });

    it('on 404s, errors, CORS preflights and the docs', async () => {
      const answers = {
        unknown: await ask('/api/nowhere'),
        unknownLibrary: await ask('/api/auth/nowhere'),
        malformed: await ask('/api/roles', {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: APP_ORIGIN },
          body: '{',
        }),
        unauthorized: await ask('/api/roles'),
        preflight: await ask('/api/roles', {
          method: 'OPTIONS',
          headers: { origin: APP_ORIGIN, 'access-control-request-method': 'POST' },
        }),
        options: await ask('/api/roles', { method: 'OPTIONS' }),
        docs: await ask('/api/docs'),
        document: await ask('/api/openapi.json'),
      };
      expect(answers.preflight.status).toBe(204);
      for (const [label, res] of Object.entries(answers))
        expect(res.headers.get('x-request-id'), label).toBe('door-check');
    });
  });

  describe('access log', () => {
    it('writes one line per request with level, event, requestId, method, path, status and durationMs', async () => {
      const res = await t.app.request('/api/health', { headers: { 'X-Request-Id': 'req-access-1' } });
      expect(res.status).toBe(200);
      const lines = accessLines();
      expect(lines).toHaveLength(1);
      expect(lines[0]).toEqual({
        time: expect.any(String),
        level: 'info',
        event: 'request',
        requestId: 'req-access-1',
        method: 'GET',
        path: '/api/health',
        status: 200,
        durationMs: expect.any(Number),
      });
      expect(lines[0]!.durationMs as number).toBeGreaterThanOrEqual(0);
      expect(new Date(lines[0]!.time as string).toISOString()).toBe(lines[0]!.time);
    });

    it('logs the final status: 404, 405-less unknown method, 413', async () => {
      await t.app.request('/api/nowhere', { method: 'DELETE' });
      await t.app.request('/api/nowhere', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: 'x'.repeat(1_048_577),
      });
      expect(accessLines().map((line) => [line.method, line.path, line.status])).toEqual([
        ['DELETE', '/api/nowhere', 404],
        ['POST', '/api/nowhere', 413],
      ]);
    });

    it('never logs the query string (it carries tokens)', async () => {
      const res = await t.app.request('/api/health?token=secret123&callbackURL=%2Fdone');
      expect(res.status).toBe(200);
      const [line] = accessLines();
      expect(line?.path).toBe('/api/health');
      const everything = JSON.stringify(t.logger.lines);
      expect(everything).not.toContain('secret123');
      expect(everything).not.toContain('token=');
      expect(everything).not.toContain('callbackURL');
    });

    it('gives handlers a logger that carries the request id', async () => {
      const res = await t.app.request('/api/test/log');
      const id = res.headers.get('x-request-id');
      const inside = t.logger.lines.find((line) => line.event === 'test.inside');
      expect(inside).toMatchObject({ level: 'info', requestId: id, note: 'from a handler' });
      expect(accessLines()[0]).toMatchObject({ requestId: id, status: 200 });
    });

    it('does not log request headers (cookies, authorization)', async () => {
      await t.app.request('/api/health', {
        headers: { cookie: 'session=cookie-value-xyz', authorization: 'Bearer bearer-value-xyz' },
      });
      const everything = JSON.stringify(t.logger.lines);
      expect(everything).not.toContain('cookie-value-xyz');
      expect(everything).not.toContain('bearer-value-xyz');
    });
  });
});

describe('logger', () => {
  it('writes one JSON line per call with time, level and event', () => {
    const sunk: { line: string; level: LogLevel }[] = [];
    const logger = createLogger({ sink: (line, level) => sunk.push({ line, level }), level: 'info' });
    logger.info('thing.happened', { count: 2 });
    logger.warn('thing.odd');
    logger.error('thing.broke', { code: 'X' });
    expect(sunk.map((entry) => entry.level)).toEqual(['info', 'warn', 'error']);
    const first = JSON.parse(sunk[0]!.line) as Record<string, unknown>;
    expect(first).toEqual({ time: expect.any(String), level: 'info', event: 'thing.happened', count: 2 });
    expect(sunk.every((entry) => !entry.line.includes('\n'))).toBe(true);
  });

  it('drops lines below its level', () => {
    const sunk: string[] = [];
    const logger = createLogger({ sink: (line) => sunk.push(line), level: 'warn' });
    logger.debug('a');
    logger.info('b');
    logger.warn('c');
    logger.error('d');
    expect(sunk.map((line) => (JSON.parse(line) as { event: string }).event)).toEqual(['c', 'd']);
  });

  it('redacts password, cookie, authorization, token and secret keys at any depth', () => {
    const logger = createMemoryLogger();
    logger.info('login', {
      email: 'user@example.com',
      password: 'pw-hunter2',
      newPassword: 'pw-new-hunter3',
      cookie: 'c-session=abc-cookie',
      headers: {
        Authorization: 'Bearer auth-header-value',
        'set-cookie': 'sid=set-cookie-value',
        accept: 'application/json',
      },
      token: 'tok-verification-value',
      accessToken: 'tok-access-value',
      refresh_token: 'tok-refresh-value',
      secret: 'sec-value',
      clientSecret: 'sec-client-value',
      key: 'sk_live_key-value',
      apiKey: 'sk_live_apikey-value',
      keyHash: 'hash-value',
      salt: 'salt-value',
      sessionId: 'sess-id-value',
      nested: [{ user: { password: 'pw-deep-value', name: 'kept' } }],
    });
    const [line] = logger.lines;
    const text = JSON.stringify(line);
    for (const secret of [
      'pw-hunter2',
      'pw-new-hunter3',
      'abc-cookie',
      'auth-header-value',
      'set-cookie-value',
      'tok-verification-value',
      'tok-access-value',
      'tok-refresh-value',
      'sec-value',
      'sec-client-value',
      'key-value',
      'apikey-value',
      'hash-value',
      'salt-value',
      'sess-id-value',
      'pw-deep-value',
    ]) {
      expect(text, secret).not.toContain(secret);
    }
    expect(line).toMatchObject({
      email: 'user@example.com',
      password: '[redacted]',
      cookie: '[redacted]',
      token: '[redacted]',
      headers: { Authorization: '[redacted]', accept: 'application/json' },
      nested: [{ user: { password: '[redacted]', name: 'kept' } }],
    });
  });

  it('redacts fields given to a child logger too', () => {
    const logger = createMemoryLogger();
    logger
      .child({ requestId: 'r-1', authorization: 'Bearer child-auth-value' })
      .warn('child.line', { cookie: 'child-cookie-value' });
    const text = JSON.stringify(logger.lines);
    expect(text).not.toContain('child-auth-value');
    expect(text).not.toContain('child-cookie-value');
    expect(logger.lines[0]).toMatchObject({ level: 'warn', event: 'child.line', requestId: 'r-1' });
  });
});
