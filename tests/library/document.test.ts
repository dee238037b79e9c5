import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIBRARY_ROUTES } from '../../src/library/routes.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call } from '../support/http.js';
import { createOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * The auth library's routes in `/api/openapi.json`, described from the rows
 * that serve them (src/library/document.ts): one operation per row, with its
 * schemas, `x-access` and the contract's error responses; and the table of
 * docs/security.md "The auth library's routes" agrees with the rows.
 */

type Json = Record<string, any>;

const SECURITY_MD = join(import.meta.dirname, '..', '..', 'docs', 'security.md');
const keyOf = (method: string, path: string) => `${method} /api/auth${path.replace(/:(\w+)/g, '{$1}')}`;

/** The access column's words for an operation's `x-access`; a cell may add a note in parentheses. */
function accessLabel(access: Json | string): string {
  if (access === 'public' || access === 'optional-auth') return access as string;
  const rule = access as Json;
  const base = rule.permissions?.length
    ? rule.permissions.map((permission: string) => `\`${permission}\``).join(' + ')
    : rule.activeOrganization
      ? 'session + an organization'
      : 'session';
  return rule.stepUp ? `${base} + step-up` : base;
}

/** The table's rows: `| GET, POST | \`/a\`, \`/b\` | access |`, one entry per method and path. */
function tableOfSecurityMd(): Map<string, string> {
  const text = readFileSync(SECURITY_MD, 'utf8');
  const section = text.slice(text.indexOf("## The auth library's routes"));
  const lines = section.slice(section.indexOf('| method | path under `/api/auth` | access |')).split('\n');
  const rows = new Map<string, string>();
  for (const line of lines.slice(2)) {
    if (!line.startsWith('|')) break;
    const [methods = '', paths = '', access = ''] = line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim());
    for (const method of methods.split(',').map((m) => m.trim()))
      for (const [, path] of paths.matchAll(/`([^`]+)`/g)) {
        const key = keyOf(method, path!);
        if (rows.has(key)) throw new Error(`docs/security.md names ${key} twice`);
        rows.set(key, access);
      }
  }
  return rows;
}

describe("the auth library's routes in the OpenAPI document", () => {
  let t: TestApp;
  let doc: Json;
  const opOf = (key: string): Json | undefined => {
    const [method, path] = key.split(' ');
    return doc.paths[path!]?.[method!.toLowerCase()];
  };

  beforeAll(async () => {
    t = await createTestApp({ env: { DOCS_ENABLED: 'true' } });
    const res = await t.app.request('/api/openapi.json');
    expect(res.status).toBe(200);
    doc = (await res.json()) as Json;
  });
  afterAll(() => t?.close());

  it('has one operation per row: summary, tag, path parameters, query parameters and body from the row', () => {
    expect(LIBRARY_ROUTES.length).toBeGreaterThanOrEqual(50);
    for (const route of LIBRARY_ROUTES) {
      const key = keyOf(route.method, route.path);
      const op = opOf(key);
      expect(op, key).toBeDefined();
      expect(op!.summary, key).toBe(route.summary);
      expect(op!.tags, key).toEqual([expect.stringMatching(/^Auth: /)]);
      const parameters = (op!.parameters ?? []) as Json[];
      const pathParams = [...route.path.matchAll(/:(\w+)/g)].map((match) => match[1]);
      expect(
        parameters.filter((p) => p.in === 'path').map((p) => p.name),
        key,
      ).toEqual(pathParams);
      const queryShape = (route.query as { shape?: Json } | undefined)?.shape ?? {};
      expect(
        parameters
          .filter((p) => p.in === 'query')
          .map((p) => p.name)
          .sort(),
        key,
      ).toEqual(Object.keys(queryShape).sort());
      expect(Boolean(op!.requestBody), `${key}: body`).toBe(Boolean(route.body ?? route.foreignForm));
      // A form another site posts (the SAML assertion consumer service) is described as the form it is.
      if (route.foreignForm)
        expect(Object.keys(op!.requestBody.content), key).toEqual(['application/x-www-form-urlencoded']);
      if (route.body) {
        expect(op!.requestBody.required, key).toBe(true);
        expect(op!.requestBody.content['application/json'].schema.type, key).toBe('object');
      }
    }
  });

  it("answers: a 200 with the library's answer, and every error in the contract's shape", () => {
    const error = { $ref: '#/components/schemas/Error' };
    for (const route of LIBRARY_ROUTES) {
      const key = keyOf(route.method, route.path);
      const responses = opOf(key)!.responses as Json;
      expect(responses['200']?.description, key).toEqual(expect.any(String));
      expect(Object.keys(responses['200'].content ?? {}).length, `${key}: 200 content`).toBe(1);
      const statuses = ['400', '401', '403', '404', '413', '429', '500', ...(route.body ? ['415'] : [])];
      for (const status of statuses) {
        expect(responses[status]?.content?.['application/json']?.schema, `${key} ${status}`).toEqual(error);
        expect(responses[status].headers['X-Request-Id'], `${key} ${status}`).toBeDefined();
      }
    }
    // Where the document states the answer's shape, it is a component of its own.
    const session = opOf('GET /api/auth/get-session')!.responses['200'].content['application/json'].schema;
    expect(JSON.stringify(session)).toContain('#/components/schemas/AuthSession');
    expect(JSON.stringify(session)).toContain('"type":"null"');
    for (const name of ['AuthUser', 'AuthSession', 'AuthOrganization', 'AuthMember', 'AuthInvitation'])
      expect(doc.components.schemas[name], name).toMatchObject({ type: 'object' });
  });

  /** Where `value` departs from `schema` (types, required fields; nothing else), as readable lines. */
  function departures(value: unknown, schema: Json, at = '$'): string[] {
    const resolved: Json = schema.$ref
      ? schema.$ref
          .slice(2)
          .split('/')
          .reduce((node: Json, part: string) => node[part], doc)
      : schema;
    if (resolved.anyOf) {
      const each = (resolved.anyOf as Json[]).map((alternative) => departures(value, alternative, at));
      return each.some((problems) => problems.length === 0) ? [] : each.flat();
    }
    const type = resolved.type;
    if (type === undefined) return [];
    const actual = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
    if (actual !== (type === 'integer' ? 'number' : type)) return [`${at}: ${actual}, documented ${type}`];
    if (type === 'array')
      return (value as unknown[]).flatMap((item, i) => departures(item, resolved.items ?? {}, `${at}[${i}]`));
    if (type !== 'object') return [];
    const record = value as Json;
    return [
      ...((resolved.required ?? []) as string[])
        .filter((name) => !(name in record))
        .map((name) => `${at}.${name}: missing`),
      ...Object.entries<Json>(resolved.properties ?? {}).flatMap(([name, inner]) =>
        name in record ? departures(record[name], inner, `${at}.${name}`) : [],
      ),
    ];
  }

  it('answers what its 200 states: every GET row an Owner can call without parameters, checked against the document', async () => {
    const owner = await signedInUser(t);
    await createOrganization(t, owner);
    const problems: string[] = [];
    let checked = 0;
    for (const route of LIBRARY_ROUTES.filter((candidate) => candidate.method === 'GET')) {
      const key = keyOf(route.method, route.path);
      const op = opOf(key)!;
      // Links a browser follows (a redirect), and calls that need a parameter, are not callable bare.
      if (op.responses['302'] || ((op.parameters ?? []) as Json[]).some((p) => p.required)) continue;
      const res = await call(t, `/api/auth${route.path}`, { jar: owner.jar });
      const [type, media] = Object.entries<Json>(op.responses['200'].content)[0]!;
      if (res.status !== 200 || !(res.headers.get('content-type') ?? '').startsWith(type)) {
        problems.push(`${key}: ${res.status} ${res.headers.get('content-type')} ${(await res.text()).slice(0, 200)}`);
        continue;
      }
      if (type === 'application/json') problems.push(...departures(await res.json(), media.schema, key));
      checked += 1;
    }
    expect(checked).toBeGreaterThanOrEqual(14);
    expect(problems).toEqual([]);
  });

  it("states the name rule of the service's own routes, and the library's door agrees on every candidate", async () => {
    const resolve = (schema: Json): Json =>
      schema.$ref
        ? schema.$ref
            .slice(2)
            .split('/')
            .reduce((node: Json, part: string) => node[part], doc)
        : schema;
    const bodyOf = (key: string): Json => resolve(opOf(key)!.requestBody.content['application/json'].schema);
    const rule = ({ type, minLength, maxLength, pattern }: Json) => ({ type, minLength, maxLength, pattern });
    const service = rule(bodyOf('POST /api/roles').properties.name);
    expect(service.pattern).toEqual(expect.any(String));
    const names = [
      bodyOf('POST /api/auth/sign-up/email').properties.name,
      bodyOf('POST /api/auth/update-user').properties.name,
      bodyOf('POST /api/auth/organization/create').properties.name,
      bodyOf('POST /api/auth/organization/update').properties.data.properties.name,
      bodyOf('POST /api/auth/passkey/update-passkey').properties.name,
    ];
    for (const name of names) expect(rule(name)).toEqual(service);

    const user = await signedInUser(t);
    const pattern = new RegExp(service.pattern);
    const documented = (value: string) =>
      value.length >= service.minLength && value.length <= service.maxLength && pattern.test(value);
    const candidates = [
      'ok',
      '  ok  ',
      '',
      ' ',
      'x'.repeat(100),
      'x'.repeat(101),
      'a\nb',
      'a\u0085',
      'a\u2029',
      '\u3000',
    ];
    for (const candidate of candidates) {
      const res = await call(t, '/api/auth/update-user', { body: { name: candidate }, jar: user.jar });
      expect(res.status, JSON.stringify(candidate)).toBe(documented(candidate) ? 200 : 400);
    }
  });

  it('states what a body requires, and the service refuses a body without it naming each field', async () => {
    const user = await signedInUser(t);
    let checked = 0;
    for (const route of LIBRARY_ROUTES.filter((candidate) => candidate.body)) {
      const key = keyOf(route.method, route.path);
      const required: string[] = opOf(key)!.requestBody.content['application/json'].schema.required ?? [];
      if (required.length === 0) continue;
      const res = await call(t, `/api/auth${route.path}`, { body: {}, jar: user.jar });
      const body = (await res.json()) as Json;
      expect(res.status, key).toBe(400);
      expect(body.code, key).toBe('VALIDATION_ERROR');
      const named = (body.details as { path: string }[]).map((detail) => detail.path);
      for (const field of required) expect(named, `${key}: ${field}`).toContain(`body.${field}`);
      checked += 1;
    }
    expect(checked).toBeGreaterThanOrEqual(20);
  });

  it("docs/security.md's table names every route under /api/auth with the access its row declares", () => {
    const table = tableOfSecurityMd();
    const documented = new Map<string, string>();
    for (const [path, item] of Object.entries<Json>(doc.paths)) {
      if (!path.startsWith('/api/auth/')) continue;
      for (const [method, op] of Object.entries<Json>(item))
        documented.set(`${method.toUpperCase()} ${path}`, accessLabel(op['x-access']));
    }
    // The library's rows and the service's own route there.
    expect([...documented.keys()].sort()).toEqual(
      [...LIBRARY_ROUTES.map((route) => keyOf(route.method, route.path)), 'GET /api/auth/providers'].sort(),
    );
    const missing = [...documented].filter(([key]) => !table.has(key)).map(([key, label]) => `${key} | ${label}`);
    expect(missing, 'routes the table does not name (method, path, access)').toEqual([]);
    expect(
      [...table.keys()].filter((key) => !documented.has(key)),
      'rows of the table no route serves',
    ).toEqual([]);
    const wrong = [...documented]
      .filter(([key, label]) => {
        const cell = table.get(key)!;
        return cell !== label && !cell.startsWith(`${label} (`);
      })
      .map(([key, label]) => `${key}: the table says "${table.get(key)}", the row "${label}"`);
    expect(wrong).toEqual([]);
  });

  it('the check is no rubber stamp: a row missing from the table, or a wrong access, is found', () => {
    const table = tableOfSecurityMd();
    expect(table.size).toBe(LIBRARY_ROUTES.length + 1);
    expect(table.get('POST /api/auth/organization/delete')).toBe('`organizations:delete` + step-up');
    expect(accessLabel({ session: true, activeOrganization: true, permissions: ['members:read'] })).toBe(
      '`members:read`',
    );
    expect(accessLabel({ session: true, stepUp: true })).toBe('session + step-up');
    expect(table.get('POST /api/auth/change-password')).not.toBe(accessLabel({ session: true }));
  });
});
