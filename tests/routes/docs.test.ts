import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIBRARY_ROUTES } from '../../src/library/routes.js';
import { type Access, declaredAccess } from '../../src/middleware/guard.js';
import { ERROR_STATUS } from '../../src/shared/errors.js';
import { ALL_PERMISSIONS, RESOURCE_ACTIONS } from '../../src/shared/permissions.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';
import { call } from '../support/http.js';
import { createOrganization } from '../support/orgs.js';
import { RATE_LIMIT_HEADERS } from '../support/rate-limit.js';
import { signedInUser } from '../support/users.js';

/**
 * `/api/openapi.json`: the document is OpenAPI 3.1,
 * lists exactly the routes the app registers (a walk of `app.routes`, not a
 * hand-kept list), and states for each its access rule and the contract's
 * error responses. `/api/docs` and the document follow DOCS_ENABLED.
 */

type Json = Record<string, any>;

// Oracle: the operations of an OpenAPI 3.1 path item, copied from the specification on purpose.
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** Registered but deliberately not described: the library's wildcard, and the docs themselves. */
const UNDOCUMENTED = new Set(['/api/auth/*', '/api/openapi.json', '/api/docs']);

/** The library's routes the service serves (src/library/routes.ts), described from the same rows. */
const LIBRARY = new Set(LIBRARY_ROUTES.map((route) => `${route.method} ${openApiPath(`/api/auth${route.path}`)}`));

/** docs/api.md "Security headers", with the configured defaults for `{cdn_host}` and `{avatar_host}`. */
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
  if (Array.isArray(value)) for (const item of value) refsIn(item, found);
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
    ...(declared.sensitive ? { stepUp: true } : {}),
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

  it('webhook URLs are URIs, and "*" stands alone in the events it documents', () => {
    const schemas = doc.components.schemas;
    for (const name of ['CreateWebhook', 'Webhook', 'CreatedWebhook'])
      expect(schemas[name].properties.url.format, name).toBe('uri');
    const events = schemas.CreateWebhook.properties.events;
    expect(events.anyOf).toEqual([
      { type: 'array', items: { type: 'string', const: '*' }, minItems: 1, maxItems: 1 },
      { type: 'array', items: { type: 'string', enum: expect.arrayContaining(['api_key.created', 'member.added']) } },
    ]);
    expect(events.anyOf[1].items.enum).not.toContain('*');
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
    // The walk found the service's routes and the library's (not an empty set compared with an empty set).
    expect(registered.size).toBeGreaterThanOrEqual(20 + LIBRARY.size);
    expect(
      [...registered].filter((key) => !documented.has(key)),
      'registered but not documented',
    ).toEqual([]);
    expect(
      [...documented].filter((key) => !registered.has(key)),
      'documented but not registered',
    ).toEqual([]);
    expect([...documented].sort()).toEqual([...registered].sort());
    // Of /api/auth/*: the service's own route, and every row of the library's the service serves.
    expect([...documented].filter((key) => key.includes(' /api/auth/')).sort()).toEqual(
      ['GET /api/auth/providers', ...LIBRARY].sort(),
    );
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
      if (access!.kind !== 'public') {
        // The session cookie under both its names (AUTH_URL http and https).
        expect(op.security, `${key}: security`).toContainEqual({ sessionCookie: [] });
        expect(op.security, `${key}: security`).toContainEqual({ secureSessionCookie: [] });
      }
      if (access!.kind === 'optional') expect(op.security, `${key}: anonymous alternative`).toContainEqual({});
      // No API key performs a sensitive action.
      if (access!.kind === 'session' && access!.sensitive)
        expect(op.security, `${key}: no API key`).not.toContainEqual({ apiKey: [] });
    }
  });

  it("gives every operation a 2xx response and the contract's error responses for its kind", () => {
    const errorRef = '#/components/schemas/Error';
    const operations = operationsOf(doc);
    expect(operations.length).toBeGreaterThanOrEqual(20);
    for (const { key, op } of operations) {
      const responses = op.responses as Json;
      const statuses = Object.keys(responses);
      expect(
        statuses.some((s) => /^2\d\d$/.test(s)),
        `${key}: a 2xx response`,
      ).toBe(true);

      // 413 and 400 everywhere: the body limit and the JSON body check are global (even a GET may carry a body).
      const expected = ['400', '413', '429', '500', '503'];
      const access = op['x-access'];
      const requirements: Json[] = op.security ?? doc.security ?? [];
      const credentialsRequired = requirements.length > 0 && requirements.every((r) => Object.keys(r).length > 0);
      if (typeof access === 'object' && access.session) expected.push('401', '403');
      else if (credentialsRequired) expected.push('401'); // e.g. the cron route's CRON_SECRET
      // The CSRF check (middleware/csrf.ts) refuses any cookie-bearing state change from a foreign origin.
      if (key.split(' ')[0] !== 'GET') expected.push('403');
      if (op.requestBody) expected.push('400', '415');
      if ((op.parameters ?? []).some((p: Json) => p.in === 'path')) expected.push('400', '404');
      if ((op.parameters ?? []).some((p: Json) => p.in === 'query')) expected.push('400');
      for (const status of expected) {
        expect(responses[status], `${key}: ${status}`).toBeDefined();
        expect(
          responses[status].content?.['application/json']?.schema?.$ref,
          `${key}: ${status} in the error shape`,
        ).toBe(errorRef);
      }
      const limited = responses['429'].headers ?? {};
      for (const header of RATE_LIMIT_HEADERS) expect(limited[header], `${key}: 429 header ${header}`).toBeDefined();

      if (op.requestBody) {
        expect(op.requestBody.required, `${key}: body required`).toBe(true);
        // JSON, but for the one form another site posts (the SAML assertion consumer service).
        const type = key.startsWith('POST /api/auth/sso/saml2/callback/')
          ? 'application/x-www-form-urlencoded'
          : 'application/json';
        expect(op.requestBody.content?.[type]?.schema, `${key}: ${type} body schema`).toBeDefined();
      }
    }
    // The error shape of docs/api.md "Errors".
    expect(doc.components.schemas.Error).toMatchObject({
      type: 'object',
      required: expect.arrayContaining(['code', 'message']),
      properties: { message: { type: 'string' }, details: { type: 'array' } },
    });
    // The code: the service's enum (ERROR_STATUS, each code once, with its status in the description), or the library's own.
    expect(doc.components.schemas.Error.properties.code.anyOf).toEqual([
      { $ref: '#/components/schemas/ErrorCode' },
      { type: 'string' },
    ]);
    const codes = doc.components.schemas.ErrorCode;
    expect(codes).toMatchObject({ type: 'string', enum: Object.keys(ERROR_STATUS) });
    for (const [code, status] of Object.entries(ERROR_STATUS))
      expect(codes.description, code).toContain(`\`${code}\` (${status}): `);
  });

  it("describes each error response by the service's codes of that status (from ERROR_STATUS)", () => {
    let described = 0;
    for (const { key, op } of operationsOf(doc)) {
      for (const [status, response] of Object.entries<Json>(op.responses)) {
        if (Number(status) < 400) continue;
        const named = [...String(response.description).matchAll(/\b[A-Z][A-Z_]+[A-Z]\b/g)]
          .map((match) => match[0])
          .filter((word) => word in ERROR_STATUS);
        expect(named.length, `${key} ${status}: names a code`).toBeGreaterThan(0);
        for (const code of named)
          expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], `${key} ${status}: ${code}`).toBe(Number(status));
        described += 1;
      }
    }
    expect(described).toBeGreaterThan(100);
  });

  it('declares X-Request-Id on every response of every operation, as the one shared header component', () => {
    const ref = '#/components/headers/XRequestId';
    expect(doc.components.headers.XRequestId).toMatchObject({
      description: expect.any(String),
      schema: { type: 'string' },
    });
    let responses = 0;
    for (const { key, op } of operationsOf(doc)) {
      for (const [status, response] of Object.entries<Json>(op.responses)) {
        expect(response.headers?.['X-Request-Id'], `${key} ${status}: X-Request-Id`).toEqual({ $ref: ref });
        responses += 1;
      }
    }
    expect(responses).toBeGreaterThan(100);
  });

  it('sends X-Request-Id in the declared form on success, on errors and on a 413 from a route that takes no body', async () => {
    const pattern = new RegExp(doc.components.headers.XRequestId.schema.pattern);
    const answers = [
      await t.app.request('/api/health'),
      await t.app.request('/api/roles'),
      // A route that takes no body still answers 413 to an oversized one: the limit runs before any route.
      await t.app.request('/api/users/me/deletion', {
        method: 'POST',
        body: 'x'.repeat(1_048_577),
        headers: { 'content-type': 'application/json' },
      }),
      await t.app.request('/api/health', { headers: { 'x-request-id': 'client-chosen=id_1' } }),
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 401, 413, 200]);
    expect(doc.paths['/api/users/me/deletion'].post.requestBody).toBeUndefined();
    expect(doc.paths['/api/users/me/deletion'].post.responses['413']).toBeDefined();
    for (const res of answers) expect(res.headers.get('x-request-id')).toMatch(pattern);
    expect(answers[3]!.headers.get('x-request-id')).toBe('client-chosen=id_1');
    // One too long for the declared form is replaced, not echoed.
    const replaced = (await t.app.request('/api/health', { headers: { 'x-request-id': 'a'.repeat(129) } })).headers.get(
      'x-request-id',
    )!;
    expect(replaced).not.toBe('a'.repeat(129));
    expect(replaced).toMatch(pattern);
  });

  it('answers a cookie-bearing state change from a foreign origin with the 403 it declares, also on a route without a session', async () => {
    const op = doc.paths['/api/cron/purge-accounts'].post;
    expect(op['x-access']).toBe('public');
    expect(op.responses['403'].content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
    const res = await t.app.request('/api/cron/purge-accounts', {
      method: 'POST',
      headers: { cookie: 'gatehouse.session_token=x', origin: 'https://evil.example' },
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as Json).code).toBe('FORBIDDEN');
  });

  it('marks the deprecated member-role route and declares its Deprecation and Link headers', () => {
    const op = doc.paths['/api/roles/members/{id}/role'].patch;
    expect(op.deprecated).toBe(true);
    const headers = op.responses['200'].headers;
    expect(headers.Deprecation).toMatchObject({ schema: { type: 'string', enum: ['true'] } });
    expect(headers.Link).toMatchObject({ schema: { type: 'string' } });
    expect(headers.Link.description).toContain('rel="successor-version"');
    expect(headers.Link.schema.example).toMatch(/^<\/api\/admin\/members\/[0-9a-f-]{36}>; rel="successor-version"$/);
    // Its successor is documented, and is not deprecated; nothing else claims to be.
    expect(doc.paths['/api/admin/members/{memberId}'].patch.deprecated).toBeUndefined();
    const deprecated = operationsOf(doc).filter(
      (o) => o.op.deprecated || Object.values<Json>(o.op.responses).some((r) => r.headers?.Deprecation),
    );
    expect(deprecated.map((o) => o.key)).toEqual(['PATCH /api/roles/members/{id}/role']);
  });

  describe('request schemas are as strict as the service', () => {
    const schemaOf = (ref: Json): Json => (ref.$ref ? (resolvePointer(doc, ref.$ref) as Json) : ref);
    const bodyOf = (path: string, method: string): Json =>
      schemaOf(doc.paths[path][method].requestBody.content['application/json'].schema);

    it('every list in a request body is a set (uniqueItems), and the permission lists are bounded by the permission table', () => {
      const arrays: string[] = [];
      for (const { key, op } of operationsOf(doc)) {
        const json = op.requestBody?.content['application/json'];
        const schema = json && schemaOf(json.schema);
        for (const [name, property] of Object.entries<Json>(schema?.properties ?? {})) {
          if (property.type !== 'array') continue;
          arrays.push(`${key} ${name}`);
          expect(property.uniqueItems, `${key} ${name}: uniqueItems`).toBe(true);
        }
      }
      expect(arrays.sort()).toEqual([
        'PATCH /api/roles/{id} permissions',
        'PATCH /api/sso/connections/{id} roleMappings',
        'PATCH /api/sso/connections/{id} scopes',
        'PATCH /api/webhooks/{id} events',
        'POST /api/api-keys scopes',
        'POST /api/roles permissions',
        'POST /api/sso/connections roleMappings',
        'POST /api/sso/connections scopes',
        'POST /api/webhooks events',
      ]);
      expect(bodyOf('/api/api-keys', 'post').properties.scopes).toMatchObject({
        minItems: 1,
        maxItems: ALL_PERMISSIONS.length,
        uniqueItems: true,
      });
      expect(bodyOf('/api/roles', 'post').properties.permissions).toMatchObject({
        maxItems: ALL_PERMISSIONS.length,
        uniqueItems: true,
      });
      expect(bodyOf('/api/roles/{id}', 'patch').properties.permissions).toMatchObject({
        maxItems: ALL_PERMISSIONS.length,
        uniqueItems: true,
      });
    });

    it('a PATCH body whose fields are all optional needs at least one (minProperties: 1)', () => {
      const patches = operationsOf(doc).filter((o) => o.method === 'patch' && o.op.requestBody);
      expect(patches.length).toBeGreaterThanOrEqual(3);
      for (const { key, op } of patches) {
        const schema = schemaOf(op.requestBody.content['application/json'].schema);
        expect(schema.additionalProperties, `${key}: unknown fields refused`).toBe(false);
        if (!schema.required?.length) expect(schema.minProperties, `${key}: minProperties`).toBe(1);
      }
      expect(bodyOf('/api/roles/{id}', 'patch').minProperties).toBe(1);
    });

    it('states the name rules: 1..100 characters as sent, not blank, no control characters or line breaks', () => {
      const names = [
        bodyOf('/api/roles', 'post').properties.name,
        bodyOf('/api/roles/{id}', 'patch').properties.name,
        bodyOf('/api/api-keys', 'post').properties.name,
      ];
      for (const name of names) {
        expect(name).toMatchObject({ type: 'string', minLength: 1, maxLength: 100, pattern: expect.any(String) });
        const pattern = new RegExp(name.pattern);
        for (const good of ['Support Desk', ' padded ', 'Café 日本', 'a\u200db'])
          expect(pattern.test(good), JSON.stringify(good)).toBe(true);
        for (const bad of [
          '   ',
          '\u3000',
          'a\nb',
          'a\rb',
          '\tx',
          'x\u0000',
          'x\u001b[0m',
          'x\u007f',
          'x\u0085',
          'x\u2028',
          'x\u2029',
        ]) {
          expect(pattern.test(bad), JSON.stringify(bad)).toBe(false);
        }
      }
    });

    it('states the expiresAt rules: an RFC 3339 date-time whose offset is Z or within ±14:00', () => {
      const expiresAt = bodyOf('/api/api-keys', 'post').properties.expiresAt;
      expect(expiresAt).toMatchObject({ type: ['string', 'null'], format: 'date-time' });
      const pattern = new RegExp(expiresAt.pattern);
      for (const good of [
        '2030-01-01T00:00:00Z',
        '2030-01-01T00:00:00+14:00',
        '2030-01-01T00:00:00-14:00',
        '2030-01-01T00:00:00+05:30',
      ])
        expect(pattern.test(good), good).toBe(true);
      for (const bad of ['2030-01-01T00:00:00+14:01', '2030-01-01T00:00:00+25:00', '2030-01-01T00:00:00-23:59'])
        expect(pattern.test(bad), bad).toBe(false);
      expect(expiresAt.description).toContain('9999-12-31T23:59:59.999Z');
    });

    it('states UUID version 4 (pattern, not only format uuid) wherever the service requires it', () => {
      const v4 = /^\^?\(?\[0-9a-fA-F\]\{8\}-\[0-9a-fA-F\]\{4\}-4/;
      const ids: string[] = [];
      for (const { key, op } of operationsOf(doc)) {
        for (const param of op.parameters ?? []) {
          // The library's path parameters are a provider id and a reset token, not ids.
          if (param.in === 'path' && LIBRARY.has(key)) continue;
          if (param.in !== 'path' && param.schema.format !== 'uuid') continue;
          ids.push(`${key} ${param.name}`);
          expect(param.schema.pattern, `${key} ${param.name}`).toMatch(v4);
        }
        const json = op.requestBody?.content['application/json'];
        const schema = json && schemaOf(json.schema);
        for (const [name, property] of Object.entries<Json>(schema?.properties ?? {})) {
          if (property.format !== 'uuid') continue;
          ids.push(`${key} ${name}`);
          expect(property.pattern, `${key} ${name}`).toMatch(v4);
        }
      }
      expect(ids).toEqual(
        expect.arrayContaining([
          'PATCH /api/roles/{id} id',
          'PATCH /api/admin/members/{memberId} roleId',
          'POST /api/roles/transfer-ownership targetMemberId',
          'POST /api/auth/organization/cancel-invitation invitationId',
          'GET /api/auth/organization/get-organization organizationId',
        ]),
      );
    });

    it('agrees with the service on which ids are UUID version 4', async () => {
      const owner = await signedInUser(t);
      await createOrganization(t, owner);
      const pattern = new RegExp(doc.paths['/api/api-keys/{id}'].delete.parameters[0].schema.pattern);
      const candidates = [
        crypto.randomUUID(),
        crypto.randomUUID().toUpperCase(),
        '6ba7b810-9dad-11d1-80b4-00c04fd430c8',
        '00000000-0000-0000-0000-000000000000',
        '3f2b7c1e-9a4d-4e8b-cc1f-2d6e5a7b9c0d',
        'not-a-uuid',
      ];
      for (const id of candidates) {
        const res = await call(t, `/api/api-keys/${id}`, { method: 'DELETE', jar: owner.jar });
        expect(res.status, id).toBe(pattern.test(id) ? 404 : 400);
      }
    });

    it('agrees with the service on which names it accepts (the same candidates through both)', async () => {
      const owner = await signedInUser(t);
      await createOrganization(t, owner);
      const name = bodyOf('/api/api-keys', 'post').properties.name;
      const pattern = new RegExp(name.pattern);
      const documented = (value: string) =>
        value.length >= name.minLength && value.length <= name.maxLength && pattern.test(value);
      const candidates = [
        'ok',
        '  ok  ',
        '',
        ' ',
        '\u00a0',
        'x'.repeat(100),
        'x'.repeat(101),
        ` ${'x'.repeat(99)}`,
        ` ${'x'.repeat(100)}`,
        'a\nb',
        'a\u0000',
        '\u0085a',
        'a\u2029',
        'ok\u3000',
        '\ufeffok',
      ];
      for (const candidate of candidates) {
        const res = await call(t, '/api/api-keys', {
          body: { name: candidate, scopes: ['roles:read'] },
          jar: owner.jar,
        });
        expect(res.status, JSON.stringify(candidate)).toBe(documented(candidate) ? 201 : 400);
      }
    });
  });

  it('describes the security schemes it references', () => {
    const schemes = Object.keys(doc.components?.securitySchemes ?? {});
    for (const { key, op } of operationsOf(doc)) {
      for (const requirement of op.security ?? []) {
        for (const name of Object.keys(requirement)) expect(schemes, `${key}: scheme ${name}`).toContain(name);
      }
    }
    expect(doc.components.securitySchemes.sessionCookie).toMatchObject({
      type: 'apiKey',
      in: 'cookie',
      name: 'gatehouse.session_token',
    });
    // What an https AUTH_URL (production) reads.
    expect(doc.components.securitySchemes.secureSessionCookie).toMatchObject({
      type: 'apiKey',
      in: 'cookie',
      name: '__Secure-gatehouse.session_token',
    });
  });

  it('names the session cookie a deployment on https sets, and that name authenticates there', async () => {
    const secure = await createTestApp({
      database,
      env: { DOCS_ENABLED: 'true', AUTH_URL: 'https://auth.example.test' },
    });
    try {
      const user = await signedInUser(secure);
      const name = doc.components.securitySchemes.secureSessionCookie.name;
      expect(user.jar.names()).toContain(name);
      const token = user.jar.get(name)!;
      const res = await secure.app.request('/api/users/me', { headers: { cookie: `${name}=${token}` } });
      expect(res.status).toBe(200);
    } finally {
      await secure.close();
    }
  });

  it("names in each protected route's 403 every code the guard can answer it with, STEP_UP_REQUIRED where x-access says stepUp", () => {
    const sensitive: string[] = [];
    for (const { key, op } of operationsOf(doc)) {
      const access = op['x-access'];
      if (typeof access !== 'object') continue;
      const forbidden: string = op.responses['403'].description;
      const has = (code: string) => forbidden.includes(code);
      expect(has('ACCOUNT_SCHEDULED_FOR_DELETION'), `${key}: 403 ${forbidden}`).toBe(
        !access.allowedWhileScheduledForDeletion,
      );
      expect(has('NO_ACTIVE_ORGANIZATION'), `${key}: 403 ${forbidden}`).toBe(Boolean(access.activeOrganization));
      expect(has('MFA_REQUIRED'), `${key}: 403 ${forbidden}`).toBe(Boolean(access.activeOrganization));
      expect(has('INSUFFICIENT_PERMISSIONS'), `${key}: 403 ${forbidden}`).toBe(Boolean(access.permissions));
      expect(has('STEP_UP_REQUIRED'), `${key}: 403 ${forbidden}`).toBe(access.stepUp === true);
      if (access.stepUp) {
        expect(forbidden).toContain('`Recent authentication required`');
        sensitive.push(key);
      }
    }
    // The sensitive service routes of docs/security.md.
    expect(sensitive).toEqual(
      expect.arrayContaining([
        'POST /api/api-keys',
        'PATCH /api/organization/security',
        'POST /api/roles/transfer-ownership',
        'POST /api/users/me/deletion',
        'POST /api/users/me/purge',
        'PATCH /api/admin/users/{id}/role',
      ]),
    );
  });

  it('answers a stale session on a stepUp route with the 403 STEP_UP_REQUIRED it declares', async () => {
    const owner = await signedInUser(t);
    await createOrganization(t, owner);
    const op = doc.paths['/api/api-keys'].post;
    expect(op['x-access'].stepUp).toBe(true);
    const maxAge = t.config.stepUp.maxAgeSeconds;
    t.clock.advance((maxAge + 1) * 1000);
    try {
      const res = await call(t, '/api/api-keys', { body: { name: 'stale', scopes: ['roles:read'] }, jar: owner.jar });
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual({ code: 'STEP_UP_REQUIRED', message: 'Recent authentication required' });
    } finally {
      t.clock.advance(-(maxAge + 1) * 1000);
    }
  });

  it('states permissions as the enum of the permission table, and the service agrees on every candidate', async () => {
    const schemaOf = (ref: Json): Json => (ref.$ref ? (resolvePointer(doc, ref.$ref) as Json) : ref);
    const bodyOf = (path: string, method: string): Json =>
      schemaOf(doc.paths[path][method].requestBody.content['application/json'].schema);
    const lists = [
      bodyOf('/api/api-keys', 'post').properties.scopes,
      bodyOf('/api/roles', 'post').properties.permissions,
      bodyOf('/api/roles/{id}', 'patch').properties.permissions,
    ];
    for (const list of lists) expect([...schemaOf(list.items).enum].sort()).toEqual([...ALL_PERMISSIONS].sort());
    const owner = await signedInUser(t);
    await createOrganization(t, owner);
    // Every resource with every action any resource has, and a few that are no permission at all.
    const resources = Object.keys(RESOURCE_ACTIONS);
    const actions = [...new Set(Object.values(RESOURCE_ACTIONS).flat())];
    const candidates = [
      ...resources.flatMap((resource) => actions.map((action) => `${resource}:${action}`)),
      'unknown:read',
      'USERS:READ',
      'users:read ',
    ];
    expect(candidates).toContain('api_keys:delete');
    for (const [index, candidate] of candidates.entries()) {
      const res = await call(t, '/api/roles', {
        body: { name: `Candidate ${index}`, permissions: [candidate] },
        jar: owner.jar,
      });
      const documented = (ALL_PERMISSIONS as readonly string[]).includes(candidate);
      expect(res.status, candidate).toBe(documented ? 201 : 400);
    }
  });

  it('says NUL is refused, and the service refuses it in a body value, a body key, a query parameter and a path parameter', async () => {
    expect(doc.info.description).toContain('NUL (U+0000)');
    const owner = await signedInUser(t);
    await createOrganization(t, owner);
    const answers = [
      await call(t, '/api/roles', { body: { name: 'a\u0000b', permissions: [] }, jar: owner.jar }),
      await call(t, '/api/roles', { body: '{"name":"ab","permissions":[],"x\\u0000":1}', jar: owner.jar }),
      await call(t, '/api/audit-logs?limit=1%00', { jar: owner.jar }),
      await call(t, `/api/roles/${crypto.randomUUID().slice(0, -1)}%00`, { method: 'DELETE', jar: owner.jar }),
    ];
    for (const res of answers) expect(((await res.json()) as Json).code, String(res.url)).toBe('VALIDATION_ERROR');
    expect(answers.map((res) => res.status)).toEqual([400, 400, 400, 400]);
  });

  it('answers a malformed JSON body with the 400 it declares, on every operation that can carry a body', async () => {
    let checked = 0;
    for (const { key, path, method, op } of operationsOf(doc)) {
      if (method === 'get') continue;
      const res = await t.app.request(path.replace(/\{\w+\}/g, crypto.randomUUID()), {
        method: method.toUpperCase(),
        headers: { 'content-type': 'application/json' },
        body: '{"unterminated": ',
      });
      expect(res.status, key).toBe(400);
      expect(((await res.json()) as Json).code, key).toBe('VALIDATION_ERROR');
      expect(op.responses['400'].description, key).toContain('malformed');
      checked += 1;
    }
    expect(checked).toBeGreaterThanOrEqual(15);
  });

  describe('405 METHOD_NOT_ALLOWED with Allow', () => {
    const TRIED = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
    const allowOf = (methods: string[]) =>
      [...new Set(methods.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])))].sort().join(', ');

    /**
     * Each path with every method served on it: a path may match more than one
     * template (`/api/roles/transfer-ownership` is also `/api/roles/{id}` to the
     * router, whose handler then refuses the id), so its methods are the union.
     */
    async function problemsOn(templates: Map<string, string[]>): Promise<string[]> {
      const patterns = [...templates].map(([template, methods]) => ({
        pattern: new RegExp(`^${template.replace(/\{\w+\}|:\w+/g, '[^/]+')}$`),
        methods,
      }));
      const problems: string[] = [];
      for (const template of templates.keys()) {
        const path = template.replace(/\{\w+\}|:\w+/g, crypto.randomUUID());
        const methods = patterns.filter((p) => p.pattern.test(path)).flatMap((p) => p.methods);
        for (const method of TRIED.filter((m) => !methods.includes(m))) {
          const res = await t.app.request(path, { method });
          const body = (await res.json()) as Json;
          const allow = res.headers.get('allow');
          if (
            res.status !== 405 ||
            body.code !== 'METHOD_NOT_ALLOWED' ||
            typeof body.message !== 'string' ||
            allow !== allowOf(methods) ||
            !res.headers.get('x-request-id')
          )
            problems.push(`${method} ${path}: ${res.status} ${JSON.stringify(body)} Allow: ${allow}`);
        }
      }
      return problems;
    }

    it('on every documented path, for each method it does not document', async () => {
      const paths = new Map<string, string[]>();
      for (const { path, method } of operationsOf(doc))
        paths.set(path, [...(paths.get(path) ?? []), method.toUpperCase()]);
      expect(paths.size).toBeGreaterThanOrEqual(20);
      expect(await problemsOn(paths)).toEqual([]);
    });

    it("on every path of the auth library's the service serves, for each method it does not serve there", async () => {
      const paths = new Map<string, string[]>();
      for (const route of LIBRARY_ROUTES)
        paths.set(`/api/auth${route.path}`, [...(paths.get(`/api/auth${route.path}`) ?? []), route.method]);
      expect(await problemsOn(paths)).toEqual([]);
    });

    it('never on a path that is not served: 404 NOT_FOUND to every method', async () => {
      for (const path of ['/api/nowhere', '/api/roles/a/b/c', '/api/auth/not-a-route', '/api/roles/']) {
        for (const method of TRIED) {
          const res = await t.app.request(path, { method });
          expect(res.status, `${method} ${path}`).toBe(404);
          expect(res.headers.get('allow'), `${method} ${path}`).toBeNull();
        }
      }
    });
  });

  it('serves /api/docs as HTML within the CSP of docs/api.md "Security headers"', async () => {
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
    for (const src of html.matchAll(/(?:src|href)="([^"]+)"/g))
      expect(src[1]).toMatch(/^https:\/\/cdn\.jsdelivr\.net\//);
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
    const t = await createTestApp({
      database,
      env: { NODE_ENV: 'production', DATABASE_URL: 'pglite://memory', DOCS_ENABLED: 'true' },
    });
    try {
      expect((await t.app.request('/api/openapi.json')).status).toBe(200);
      expect((await t.app.request('/api/docs')).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});
