import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/shared/config.js';
import { createTestApp, type TestApp } from '../support/app.js';

const APP_ORIGIN = 'http://localhost:3000';
const OTHER_ORIGIN = 'https://evil.example';

/** Parses in production without touching a server: the routes these tests hit never need the database. */
const PRODUCTION_ENV = {
  NODE_ENV: 'production',
  AUTH_SECRET: 'cOrS-test-7fK2mQ9xL4vB8nR1tY6wE3zA0pJ5hD',
  DATABASE_URL: 'postgres://x@localhost/x',
  RATE_LIMIT_ENABLED: 'false',
};

function corsHeaders(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    if (name.startsWith('access-control-')) out[name] = value;
  });
  return out;
}

function varyList(res: Response): string[] {
  return (res.headers.get('vary') ?? '')
    .split(',')
    .map((v) => v.trim().toLowerCase())
    .filter(Boolean);
}

function preflight(app: TestApp['app'], origin: string, path = '/api/health') {
  return app.request(path, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
  });
}

describe('CORS (docs/api.md "CORS")', () => {
  let t: TestApp;
  const extra: TestApp[] = [];
  /** Further apps share the first one's database: one PGlite per file. */
  const appWith = async (env: Record<string, string>) => {
    const app = await createTestApp({ env, database: t.database });
    extra.push(app);
    return app;
  };

  beforeAll(async () => {
    t = await createTestApp({ env: { CORS_ORIGIN: 'http://localhost:3000,https://app.example.com' } });
  });
  afterAll(async () => {
    for (const app of extra) await app.close();
    await t.close();
  });

  describe('an explicit list', () => {
    it('answers an allowed origin with that origin, credentials and Vary: Origin', async () => {
      for (const origin of [APP_ORIGIN, 'https://app.example.com']) {
        const res = await t.app.request('/api/health', { headers: { origin } });
        expect(res.status).toBe(200);
        expect(res.headers.get('access-control-allow-origin')).toBe(origin);
        expect(res.headers.get('access-control-allow-credentials')).toBe('true');
        expect(varyList(res)).toContain('origin');
      }
    });

    it('exposes X-Request-Id and the rate-limit headers to the allowed origin', async () => {
      const res = await t.app.request('/api/health', { headers: { origin: APP_ORIGIN } });
      const exposed = (res.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(',');
      expect(exposed).toEqual(
        expect.arrayContaining([
          'x-request-id',
          'x-ratelimit-limit',
          'x-ratelimit-remaining',
          'x-ratelimit-reset',
          'retry-after',
        ]),
      );
    });

    it('gives another origin no Access-Control-Allow-Origin, and still Vary: Origin', async () => {
      for (const origin of [OTHER_ORIGIN, 'http://localhost:3001', 'https://app.example.com.evil.example', 'null']) {
        const res = await t.app.request('/api/health', { headers: { origin } });
        expect(res.status).toBe(200);
        expect(res.headers.get('access-control-allow-origin'), origin).toBeNull();
        expect(varyList(res)).toContain('origin');
      }
    });

    it('answers a request without Origin (not a CORS request) with no Access-Control header, and Vary: Origin', async () => {
      for (const path of ['/api/health', '/api/session', '/api/nowhere']) {
        const res = await t.app.request(path);
        expect(
          [...res.headers.keys()].filter((name) => name.startsWith('access-control-')),
          path,
        ).toEqual([]);
        expect(varyList(res), path).toContain('origin');
      }
    });

    it('never sends a literal * (credentials forbid it)', async () => {
      const res = await t.app.request('/api/health', { headers: { origin: APP_ORIGIN } });
      expect(res.headers.get('access-control-allow-origin')).not.toBe('*');
      const none = await t.app.request('/api/health');
      expect(none.headers.get('access-control-allow-origin')).toBeNull();
    });

    it('answers a preflight from an allowed origin with 204, methods, headers and credentials', async () => {
      const res = await preflight(t.app, APP_ORIGIN, '/api/roles');
      expect(res.status).toBe(204);
      expect(await res.text()).toBe('');
      expect(res.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
      expect(res.headers.get('access-control-allow-credentials')).toBe('true');
      const methods = (res.headers.get('access-control-allow-methods') ?? '').split(',');
      expect(methods).toEqual(expect.arrayContaining(['GET', 'POST', 'PATCH', 'DELETE']));
      const allowHeaders = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(',');
      expect(allowHeaders).toContain('content-type');
      expect(varyList(res)).toContain('origin');
    });

    it('answers a preflight from another origin without Allow-Origin', async () => {
      const res = await preflight(t.app, OTHER_ORIGIN);
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
    });
  });

  describe('* outside production', () => {
    it('reflects any origin, with credentials', async () => {
      const dev = await appWith({ NODE_ENV: 'development', CORS_ORIGIN: '*' });
      expect(dev.config.cors.origins).toBe('*');
      for (const origin of [OTHER_ORIGIN, 'http://127.0.0.1:5173']) {
        const res = await dev.app.request('/api/health', { headers: { origin } });
        expect(res.headers.get('access-control-allow-origin')).toBe(origin);
        expect(res.headers.get('access-control-allow-credentials')).toBe('true');
        expect(varyList(res)).toContain('origin');
      }
      const pre = await preflight(dev.app, OTHER_ORIGIN);
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe(OTHER_ORIGIN);
      expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
    });

    it('allows every origin when * stands beside explicit origins', () => {
      const { config, warnings } = parseConfig({ NODE_ENV: 'development', CORS_ORIGIN: 'https://app.example.com, *' });
      expect(config.cors.origins).toBe('*');
      expect(warnings.map((w) => w.event)).not.toContain('config.cors_disabled');
    });

    it('compares origins case-insensitively', () => {
      const { config } = parseConfig({ NODE_ENV: 'development', CORS_ORIGIN: 'HTTPS://App.Example.com/' });
      expect(config.cors.origins).toEqual(['https://app.example.com']);
    });
  });

  describe('* in production', () => {
    it('parses to disabled with a config.cors_disabled warning', () => {
      const { config, warnings } = parseConfig({ ...PRODUCTION_ENV, CORS_ORIGIN: '*' });
      expect(config.cors.origins).toBe('disabled');
      expect(warnings).toContainEqual(expect.objectContaining({ event: 'config.cors_disabled', level: 'warn' }));
    });

    it('sends no CORS header at all, on a request or a preflight', async () => {
      const prod = await appWith({ ...PRODUCTION_ENV, CORS_ORIGIN: '*' });
      expect(prod.config.env).toBe('production');
      expect(prod.config.cors.origins).toBe('disabled');

      const res = await prod.app.request('/api/not-a-route', { headers: { origin: OTHER_ORIGIN } });
      expect(res.status).toBe(404);
      expect(corsHeaders(res)).toEqual({});

      const pre = await preflight(prod.app, OTHER_ORIGIN, '/api/not-a-route');
      expect(pre.status).not.toBe(204);
      expect(corsHeaders(pre)).toEqual({});
    });

    it('drops * silently from a list with explicit origins', async () => {
      const { config, warnings } = parseConfig({ ...PRODUCTION_ENV, CORS_ORIGIN: '*, https://app.example.com' });
      expect(config.cors.origins).toEqual(['https://app.example.com']);
      expect(warnings.map((w) => w.event)).not.toContain('config.cors_disabled');
      expect(JSON.stringify(warnings)).not.toMatch(/CORS/i);

      const prod = await appWith({ ...PRODUCTION_ENV, CORS_ORIGIN: '*, https://app.example.com' });
      const allowed = await prod.app.request('/api/not-a-route', { headers: { origin: 'https://app.example.com' } });
      expect(allowed.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
      expect(allowed.headers.get('access-control-allow-credentials')).toBe('true');
      const other = await prod.app.request('/api/not-a-route', { headers: { origin: OTHER_ORIGIN } });
      expect(other.headers.get('access-control-allow-origin')).toBeNull();
    });

    it('allows an explicit list as given', async () => {
      const prod = await appWith({ ...PRODUCTION_ENV, CORS_ORIGIN: 'https://app.example.com/' });
      expect(prod.config.cors.origins).toEqual(['https://app.example.com']);
      const res = await prod.app.request('/api/not-a-route', { headers: { origin: 'https://app.example.com' } });
      expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    });
  });

  it('defaults CORS_ORIGIN to http://localhost:3000', async () => {
    const { config } = parseConfig({ NODE_ENV: 'development' });
    expect(config.cors.origins).toEqual(['http://localhost:3000']);
    const dflt = await appWith({});
    const res = await dflt.app.request('/api/health', { headers: { origin: APP_ORIGIN } });
    expect(res.headers.get('access-control-allow-origin')).toBe(APP_ORIGIN);
    const other = await dflt.app.request('/api/health', { headers: { origin: OTHER_ORIGIN } });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
  });
});
