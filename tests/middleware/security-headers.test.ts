import { z } from '@hono/zod-openapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { access, guard } from '../../src/middleware/guard.js';
import { createRouter, defineRoute } from '../../src/router.js';
import { createTestApp, type TestApp } from '../support/app.js';

const DEFAULT_CDN = 'https://cdn.jsdelivr.net';
const DEFAULT_AVATARS = 'https://lh3.googleusercontent.com https://avatars.githubusercontent.com';

/** docs/api.md "Security headers", with the placeholders filled. */
// Oracle: copied from the contract on purpose; the service must agree with it.
function expectedHeaders(cdnHost: string, avatarHost: string): Record<string, string> {
  return {
    'content-security-policy':
      `default-src 'none'; script-src 'self' 'unsafe-inline' ${cdnHost}; style-src 'self' 'unsafe-inline' ${cdnHost}; ` +
      `img-src 'self' data: ${avatarHost}; font-src 'self'; connect-src 'self'`,
    'strict-transport-security': 'max-age=31536000; includeSubDomains',
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'permissions-policy': 'camera=(), microphone=(), geolocation=()',
  };
}

function expectSpecHeaders(res: Response, cdnHost = DEFAULT_CDN, avatarHost = DEFAULT_AVATARS) {
  for (const [name, value] of Object.entries(expectedHeaders(cdnHost, avatarHost))) {
    expect(res.headers.get(name), name).toBe(value);
  }
  expect(res.headers.get('cross-origin-embedder-policy')).toBeNull();
  expect(res.headers.get('x-powered-by')).toBeNull();
}

const EchoBody = z.object({ name: z.string() }).strict();
const echoRoute = defineRoute({
  method: 'post',
  path: '/api/test/echo',
  access: access.public(),
  request: { body: { content: { 'application/json': { schema: EchoBody } } } },
  responses: { 200: { description: 'echo', content: { 'application/json': { schema: EchoBody } } } },
});

function addTestRoutes(t: TestApp) {
  t.app.get('/api/test/boom', guard(access.public()), () => {
    throw new Error('boom');
  });
  t.app.route(
    '/',
    createRouter().openapi(echoRoute, (c) => c.json(c.req.valid('json'), 200)),
  );
}

describe('security headers (docs/api.md "Security headers")', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
    addTestRoutes(t);
  });
  afterAll(() => t.close());

  it('sends every security header with its exact value on a 200', async () => {
    const res = await t.app.request('/api/health');
    expect(res.status).toBe(200);
    expectSpecHeaders(res);
  });

  it('sends them on a 404', async () => {
    const res = await t.app.request('/api/does-not-exist');
    expect(res.status).toBe(404);
    expectSpecHeaders(res);
  });

  it('sends them on a 415', async () => {
    const res = await t.app.request('/api/test/echo', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'name=a',
    });
    expect(res.status).toBe(415);
    expectSpecHeaders(res);
  });

  it('sends them on a 413', async () => {
    const res = await t.app.request('/api/test/echo', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(1_048_577) },
      body: 'x'.repeat(1_048_577),
    });
    expect(res.status).toBe(413);
    expectSpecHeaders(res);
  });

  it('sends them on a 500', async () => {
    const res = await t.app.request('/api/test/boom');
    expect(res.status).toBe(500);
    expectSpecHeaders(res);
  });

  it('sends them on a 400 validation error and on a CORS preflight', async () => {
    const bad = await t.app.request('/api/test/echo', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":1}',
    });
    expect(bad.status).toBe(400);
    expectSpecHeaders(bad);

    const preflight = await t.app.request('/api/test/echo', {
      method: 'OPTIONS',
      headers: { origin: 'http://localhost:3000', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(204);
    expectSpecHeaders(preflight);
  });

  it('applies the same policy in production', async () => {
    const prod = await createTestApp({
      database: t.database,
      env: {
        NODE_ENV: 'production',
        AUTH_SECRET: 'Qm8vT2xLr5pZ0aW7cN4yE1hJ6kU3sF9dG0bX',
        DATABASE_URL: 'postgres://x@localhost/x',
      },
    });
    try {
      const res = await prod.app.request('/api/does-not-exist');
      expect(res.status).toBe(404);
      expectSpecHeaders(res);
    } finally {
      await prod.close();
    }
  });

  it('fills {cdn_host} and {avatar_host} from CSP_CDN_HOST and CSP_AVATAR_HOST', async () => {
    const custom = await createTestApp({
      database: t.database,
      env: {
        CSP_CDN_HOST: 'https://cdn.example.test',
        CSP_AVATAR_HOST: 'https://img.example.test https://avatars.example.test',
      },
    });
    try {
      const ok = await custom.app.request('/api/health');
      expect(ok.status).toBe(200);
      expectSpecHeaders(ok, 'https://cdn.example.test', 'https://img.example.test https://avatars.example.test');
      expect(ok.headers.get('content-security-policy')).not.toContain('jsdelivr');

      const missing = await custom.app.request('/api/nope');
      expect(missing.status).toBe(404);
      expectSpecHeaders(missing, 'https://cdn.example.test', 'https://img.example.test https://avatars.example.test');
    } finally {
      await custom.close();
    }
  });
});
