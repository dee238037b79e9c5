import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { declaredAccess, type Access } from '../src/middleware/guard.js';
import { createTestApp, type TestApp } from './support/app.js';
import { openTestDatabase, type TestDatabase } from './support/database.js';

/**
 * Issue 7 item 1 / API.md `/api/openapi.json`: the document is OpenAPI 3.1,
 * lists exactly the routes the app registers (a walk of `app.routes`, not a
 * hand-kept list), and states for each its access rule and the contract's
 * error responses. `/api/docs` and the document follow DOCS_ENABLED.
 */

type Json = Record<string, any>;

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** Registered but deliberately not described: the library's wildcard, and the docs themselves. */
const UNDOCUMENTED = new Set(['/api/auth/*', '/api/openapi.json', '/api/docs']);

const RATE_LIMIT_HEADERS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After'];

/** Spec §8 "Security headers", with the configured defaults for `{cdn_host}` and `{avatar_host}`. */
const SPEC_CSP =
  "default-src 'none'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; " +
  "img-src 'self' data: https://lh3.googleusercontent.com https://avatars.githubusercontent.com; font-src 'self'; connect-src 'self'";

/** hono's `/api/roles/:id` (optionally `:id{regex}`) as OpenAPI's `/api/roles/{id}`. */
function openApiPath(path: string): string {
  return path.replace(/:(\w+)(\{[^}]*\})?/g, '{$1}');
}

function isGlobalMiddleware(route: { method: string; path: string }): boolean {
  return route.method === 'ALL' && (route.path === '*' || route.path === '/*');
}

interface Operation {
  key: string;
  path: string;
  method: string;
  op: Json;
}

function operationsOf(doc: Json): Operation[] {
  const out: Operation[] = [];
  for (const [path, item] of Object.entries<Json>(doc.paths ?? {})) {
    for (const method of HTTP_METHODS) {
      if (item[method]) out.push({ key: `${method.toUpperCase()} ${path}`, path, method, op: item[method] });
    }
  }
  return out;
}

/** Every `$ref` in the document, to check each one resolves. */
function refsIn(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((item) => refsIn(item, found));
  else if (value && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) {
      if (key === '$ref' && typeof inner === 'string') found.push(inner);
      else refsIn(inner, found);
    }
  }
  return found;
}

function resolvePointer(doc: Json, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  return ref
    .slice(2)
    .split('/')
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<any>((node, part) => (node === undefined || node === null ? undefined : node[part]), doc);
}

/** What `x-access` must say for a route's declared access (router.ts describeAccess). */
function expectedXAccess(declared: Access): unknown {
  if (declared.kind === 'public') return 'public';
  if (declared.kind === 'optional') return 'optional-auth';
  const needsOrganization = Boolean(declared.organization || declared.permissions?.length);
  return {
    session: true,
    ...(declared.platformRoles ? { platformRoles: [...declared.platformRoles] } : {}),
    ...(needsOrganization ? { activeOrganization: true } : {}),
    ...(declared.permissions?.length ? { permissions: [...declared.permissions] } : {}),
    ...(declared.allowScheduledForDeletion ? { allowedWhileScheduledForDeletion: true } : {}),
  };
}

describe('OpenAPI document (DOCS_ENABLED=true)', () => {
  let database: TestDatabase;
  let t: TestApp;
  let doc: Json;

  beforeAll(async () => {
    database = await openTestDatabase();
    t = await createTestApp({ database, env: { DOCS_ENABLED: 'true' } });
    const res = await t.app.request('/api/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    doc = (await res.json()) as Json;
  });
  afterAll(async () => {
    await t?.close();
    await database?.close();
  });

  it('validates against the OpenAPI 3.1 schema', async () => {
    expect(doc.openapi).toBe('3.1.0');
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');

    // The validator is not a rubber stamp: the same document with a broken operation fails.
    const broken = structuredClone(doc);
    broken.paths['/api/health'].get.responses = { 200: { content: {} } }; // a response without its required description
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it('resolves every $ref inside the document', () => {
    const refs = [...new Set(refsIn(doc))];
    expect(refs.length).toBeGreaterThan(0);
    const dangling = refs.filter((ref) => resolvePointer(doc, ref) === undefined);
    expect(dangling).toEqual([]);
  });

  it('lists exactly the routes the app registers, each with its method', () => {
    const registered = new Set<string>();
    for (const route of t.app.routes) {
      if (isGlobalMiddleware(route) || UNDOCUMENTED.has(route.path)) continue;
      registered.add(`${route.method} ${openApiPath(route.path)}`);
    }
    const documented = new Set(operationsOf(doc).map((o) => o.key));
    // The walk found the service's routes (not an empty set compared with an empty set).
    expect(registered.size).toBeGreaterThanOrEqual(20);
    expect([...registered].filter((key) => !documented.has(key)), 'registered but not documented').toEqual([]);
    expect([...documented].filter((key) => !registered.has(key)), 'documented but not registered').toEqual([]);
    expect([...documented].sort()).toEqual([...registered].sort());
  });

  it("states each route's access as the guard enforces it (x-access and security)", () => {
    const declared = new Map<string, Access>();
    for (const route of t.app.routes) {
      const access = declaredAccess(route.handler);
      if (access && !UNDOCUMENTED.has(route.path)) declared.set(`${route.method} ${openApiPath(route.path)}`, access);
    }
    for (const { key, op } of operationsOf(doc)) {
      expect(op['x-access'], `${key}: x-access`).toBeDefined();
      const access = declared.get(key);
      expect(access, `${key}: no guard declared for a documented route`).toBeDefined();
      expect(op['x-access'], `${key}: x-access`).toEqual(expectedXAccess(access!));
      expect(Array.isArray(op.security), `${key}: security`).toBe(true);
      if (access!.kind === 'session') expect(op.security, `${key}: security`).toContainEqual({ sessionCookie: [] });
      if (access!.kind === 'optional') expect(op.security, `${key}: anonymous alternative`).toContainEqual({});
    }
  });

  it("gives every operation a 2xx response and the contract's error responses for its kind", () => {
    const errorRef = '#/components/schemas/Error';
    const operations = operationsOf(doc);
    expect(operations.length).toBeGreaterThanOrEqual(20);
    for (const { key, op } of operations) {
      const responses = op.responses as Json;
      const statuses = Object.keys(responses);
      expect(statuses.some((s) => /^2\d\d$/.test(s)), `${key}: a 2xx response`).toBe(true);

      const expected = ['429', '500', '503'];
      const access = op['x-access'];
      const requirements: Json[] = op.security ?? doc.security ?? [];
      const credentialsRequired = requirements.length > 0 && requirements.every((r) => Object.keys(r).length > 0);
      if (typeof access === 'object' && access.session) expected.push('401', '403');
      else if (credentialsRequired) expected.push('401'); // e.g. the cron route's CRON_SECRET
      if (op.requestBody) expected.push('400', '413', '415');
      if ((op.parameters ?? []).some((p: Json) => p.in === 'path')) expected.push('400', '404');
      if ((op.parameters ?? []).some((p: Json) => p.in === 'query')) expected.push('400');
      for (const status of expected) {
        expect(responses[status], `${key}: ${status}`).toBeDefined();
        expect(responses[status].content?.['application/json']?.schema?.$ref, `${key}: ${status} in the error shape`).toBe(errorRef);
      }
      const limited = responses['429'].headers ?? {};
      for (const header of RATE_LIMIT_HEADERS) expect(limited[header], `${key}: 429 header ${header}`).toBeDefined();

      if (op.requestBody) {
        expect(op.requestBody.required, `${key}: body required`).toBe(true);
        expect(op.requestBody.content?.['application/json']?.schema, `${key}: JSON body schema`).toBeDefined();
      }
    }
    // The error shape of API.md "Errors".
    expect(doc.components.schemas.Error).toMatchObject({
      type: 'object',
      required: expect.arrayContaining(['code', 'message']),
      properties: { code: { type: 'string' }, message: { type: 'string' }, details: { type: 'array' } },
    });
  });

  it('describes the security schemes it references', () => {
    const schemes = Object.keys(doc.components?.securitySchemes ?? {});
    for (const { key, op } of operationsOf(doc)) {
      for (const requirement of op.security ?? []) {
        for (const name of Object.keys(requirement)) expect(schemes, `${key}: scheme ${name}`).toContain(name);
      }
    }
    expect(doc.components.securitySchemes.sessionCookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'gatehouse.session_token' });
  });

  it('serves /api/docs as HTML within the spec CSP', async () => {
    const res = await t.app.request('/api/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toBe(SPEC_CSP);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await res.text();
    expect(html).toContain('SwaggerUIBundle');
    expect(html).toContain("url: '/api/openapi.json'");
    // Its assets come from the CSP's {cdn_host} and nowhere else.
    for (const src of html.matchAll(/(?:src|href)="([^"]+)"/g)) expect(src[1]).toMatch(/^https:\/\/cdn\.jsdelivr\.net\//);
  });
});

describe('DOCS_ENABLED off', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await openTestDatabase();
  });
  afterAll(() => database?.close());

  const cases: [string, Record<string, string>][] = [
    ['DOCS_ENABLED=false', { DOCS_ENABLED: 'false' }],
    ['NODE_ENV=production (off by default)', { NODE_ENV: 'production', DATABASE_URL: 'pglite://memory' }],
  ];
  for (const [label, env] of cases) {
    it(`${label}: /api/openapi.json and /api/docs answer 404 in the contract shape`, async () => {
      const t = await createTestApp({ database, env });
      try {
        for (const path of ['/api/openapi.json', '/api/docs']) {
          const res = await t.app.request(path);
          expect(res.status, path).toBe(404);
          expect(res.headers.get('content-type'), path).toMatch(/^application\/json/);
          expect(await res.json(), path).toEqual({ code: 'NOT_FOUND', message: 'Not found' });
          expect(res.headers.get('content-security-policy'), path).toBe(SPEC_CSP);
        }
      } finally {
        await t.close();
      }
    });
  }

  it('NODE_ENV=production with DOCS_ENABLED=true serves them', async () => {
    const t = await createTestApp({ database, env: { NODE_ENV: 'production', DATABASE_URL: 'pglite://memory', DOCS_ENABLED: 'true' } });
    try {
      expect((await t.app.request('/api/openapi.json')).status).toBe(200);
      expect((await t.app.request('/api/docs')).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});
