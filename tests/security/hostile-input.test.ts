/**
 * Hostile input, over HTTP, on every
 * route that takes input: both doors walked from the OpenAPI document
 * (checked against `app.routes` and the library's rows): the service's
 * routes, and the auth library's under `/api/auth`. Each case answers a 4xx in the contract's shape
 * `{ code, message, details? }` (docs/api.md "Errors"; the library uses the same
 * shape), never a 5xx, and writes nothing (every table's rows unchanged).
 * Exceptions, stated where they occur: a body of exactly 1 MiB may be
 * accepted (it is within the limit), and the library ignores unknown fields
 * by design (they must then take no effect and pollute nothing).
 *
 * What only a raw socket can send (lying Content-Length, Content-Length with
 * Transfer-Encoding, a 32 KiB header, raw bytes in the request line) goes to
 * a real listener with the Node entry's client-error handling.
 */

import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerClientErrors } from '../../src/entries/node-listener.js';
import { MAX_BODY_BYTES } from '../../src/middleware/body-limit.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { APP_ORIGIN, type CookieJar } from '../support/http.js';
import { createOrganization, type TestOrganization } from '../support/orgs.js';
import { parseResponses, rawExchange } from '../support/raw-http.js';
import { type SignedInUser, signedInUser } from '../support/users.js';
import { concrete, exampleOf, type Operation, propertiesOf, type Walk, walkRoutes, wrongTypesFor } from './routes.js';
import { contractProblems, counts, fingerprint, writesBetween } from './support.js';

const MIB = MAX_BODY_BYTES;
const NUL = '\u0000';
/** Bytes that are not UTF-8: a lead byte without its continuation, and 0xFF which never occurs. */
const INVALID_UTF8 = Buffer.from([0xc3, 0x28, 0xff]);
const MARK = '@@INVALID-UTF8@@';

type Body = string | Buffer | undefined;

interface Case {
  label: string;
  method: string;
  path: string;
  body?: Body;
  contentType?: string | null;
  /** Statuses this case may answer (default: any 4xx). */
  allowed?: (status: number) => boolean;
  /** The code the answer must carry. */
  code?: string;
  /** A `details` entry the answer must carry, by its path (`body.email`). */
  detail?: string;
  /** A write is allowed (a body of exactly 1 MiB may be accepted). */
  mayWrite?: boolean;
  jar?: CookieJar;
}

const is4xx = (status: number) => status >= 400 && status < 500;
const only =
  (...statuses: number[]) =>
  (status: number) =>
    statuses.includes(status);

/** JSON text with the marker replaced by bytes that are not UTF-8. */
function withInvalidUtf8(json: string): Buffer {
  const [before = '', ...after] = json.split(MARK);
  return Buffer.concat([Buffer.from(before), INVALID_UTF8, Buffer.from(after.join(MARK))]);
}

/** `json` padded with spaces to exactly `size` bytes (still the same JSON document). */
function padded(json: string, size: number): Buffer {
  const bytes = Buffer.from(json);
  if (bytes.length > size) throw new Error('baseline body larger than the pad size');
  return Buffer.concat([bytes, Buffer.alloc(size - bytes.length, 0x20)]);
}

const deepArray = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

function polluted(): boolean {
  const probe = {} as Record<string, unknown>;
  return probe.polluted !== undefined || Object.hasOwn(Object.prototype, 'polluted');
}

describe('hostile input', () => {
  let t: TestApp;
  let owner: SignedInUser;
  let org: TestOrganization;
  /** Signs in only to be thrown at the library's routes (some of which end its session). */
  let bystander: SignedInUser;
  let walk: Walk;
  let server: ServerType;
  let port: number;

  beforeAll(async () => {
    t = await createTestApp();
    owner = await signedInUser(t);
    org = await createOrganization(t, owner);
    // A superadmin Owner passes every guard, so each case reaches validation.
    await t.database.withOwner((db) =>
      db.updateTable('users').set({ role: 'superadmin' }).where('id', '=', owner.id).execute(),
    );
    bystander = await signedInUser(t);
    walk = await walkRoutes(t, owner.jar);
    server = serve({
      fetch: t.app.fetch,
      port: 0,
      hostname: '127.0.0.1',
      serverOptions: { requestTimeout: 1500, headersTimeout: 1000, connectionsCheckingInterval: 200 },
    });
    answerClientErrors(server);
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => {
      if (server && 'closeAllConnections' in server) server.closeAllConnections();
      server ? server.close(() => resolve()) : resolve();
    });
    await t?.close();
  });

  function send(c: Case): Promise<Response> {
    const headers: Record<string, string> = { origin: APP_ORIGIN, cookie: (c.jar ?? owner.jar).header() };
    const contentType =
      c.contentType === undefined ? (c.body === undefined ? null : 'application/json') : c.contentType;
    if (contentType) headers['content-type'] = contentType;
    return Promise.resolve(
      t.app.request(c.path, {
        method: c.method,
        headers,
        body: typeof c.body === 'string' || c.body === undefined ? c.body : new Uint8Array(c.body),
      }),
    );
  }

  /** Runs the cases; returns one line per broken expectation (all of them, not only the first). */
  async function run(cases: Case[]): Promise<string[]> {
    const problems: string[] = [];
    for (const c of cases) {
      const before = c.mayWrite ? null : await fingerprint(t);
      const res = await send(c);
      const text = await res.text();
      const label = `${c.label} (${c.method} ${c.path.slice(0, 80)})`;
      const allowed = c.allowed ?? is4xx;
      if (res.status < 400 && allowed(res.status)) {
        // An accepted answer (only where a case allows it): not an error body to check.
      } else
        for (const problem of contractProblems(res.status, res.headers.get('content-type') ?? '', text, allowed))
          problems.push(`${label}: ${problem}`);
      if (c.code && !text.includes(`"code":"${c.code}"`))
        problems.push(`${label}: expected ${c.code}, got ${res.status} ${text.slice(0, 200)}`);
      if (c.detail && !text.includes(`"path":"${c.detail}"`))
        problems.push(`${label}: expected details naming ${c.detail}, got ${res.status} ${text.slice(0, 300)}`);
      if (polluted()) problems.push(`${label}: Object.prototype polluted`);
      if (before) {
        const writes = writesBetween(before, await fingerprint(t));
        if (writes) problems.push(`${label}: ${writes}`);
      }
    }
    return problems;
  }

  // The service's door; the library's is walked in its own describe below.
  const service = () => walk.operations.filter((op) => !op.library);
  const withBody = () => service().filter((op) => op.body);
  const withParams = () => service().filter((op) => op.pathParams.length > 0);
  const withQuery = () => service().filter((op) => op.query);

  it('walks the routes that take input', () => {
    const keys = (ops: Operation[]) => ops.map((op) => op.key);
    // The known ones are among them (the walk is not empty or partial).
    expect(keys(withBody())).toEqual(
      expect.arrayContaining([
        'POST /api/roles',
        'PATCH /api/roles/{id}',
        'POST /api/api-keys',
        'PATCH /api/admin/members/{memberId}',
        'POST /api/roles/transfer-ownership',
        'POST /api/users/me/purge',
        'PATCH /api/admin/users/{id}/role',
      ]),
    );
    expect(keys(withParams())).toEqual(
      expect.arrayContaining([
        'DELETE /api/api-keys/{id}',
        'DELETE /api/roles/{id}',
        'PATCH /api/roles/members/{id}/role',
      ]),
    );
    expect(keys(withQuery())).toEqual(expect.arrayContaining(['GET /api/audit-logs', 'GET /api/admin/users']));
  });

  it('service bodies: unknown fields (__proto__, constructor), wrong types, NUL, invalid UTF-8, deep nesting, not JSON: 400/415, nothing written', async () => {
    const cases: Case[] = [];
    for (const op of withBody()) {
      const path = concrete(op);
      const baseline = exampleOf(walk, op.body!) as Record<string, unknown>;
      const json = JSON.stringify(baseline);
      const rest = json.slice(1);
      const base = { method: op.method, path };
      const invalid = { code: 'VALIDATION_ERROR', allowed: only(400) };
      cases.push(
        { ...base, ...invalid, label: 'unknown field __proto__', body: `{"__proto__":{"polluted":"yes"},${rest}` },
        {
          ...base,
          ...invalid,
          label: 'unknown field constructor',
          body: `{"constructor":{"prototype":{"polluted":"yes"}},${rest}`,
        },
        { ...base, ...invalid, label: 'unknown field', body: JSON.stringify({ ...baseline, unexpected: true }) },
        { ...base, ...invalid, label: 'deeply nested unknown field', body: `{"deep":${deepObject(20_000)},${rest}` },
        { ...base, ...invalid, label: 'malformed JSON', body: json.slice(0, -1) },
        { ...base, ...invalid, label: 'empty body', body: '' },
        {
          ...base,
          allowed: only(415),
          code: 'UNSUPPORTED_MEDIA_TYPE',
          label: 'not JSON',
          body: json,
          contentType: 'text/plain',
        },
        {
          ...base,
          allowed: only(415),
          code: 'UNSUPPORTED_MEDIA_TYPE',
          label: 'form body',
          body: 'name=x',
          contentType: 'application/x-www-form-urlencoded',
        },
      );
      for (const whole of [Array.isArray(baseline) ? '{}' : '[]', '"a string"', '123', 'null', 'true'])
        cases.push({ ...base, ...invalid, label: `body ${whole}`, body: whole });
      for (const [name, schema] of propertiesOf(walk, op.body!)) {
        for (const wrong of wrongTypesFor(schema))
          cases.push({
            ...base,
            ...invalid,
            label: `${name} = ${JSON.stringify(wrong)}`,
            body: JSON.stringify({ ...baseline, [name]: wrong }),
          });
        cases.push({
          ...base,
          ...invalid,
          label: `${name} nested 100,000 deep`,
          body: JSON.stringify({ ...baseline, [name]: '@@DEEP@@' }).replace('"@@DEEP@@"', deepArray(100_000)),
        });
        const types = [schema.type, ...(schema.anyOf ?? []).map((alt: { type?: string }) => alt.type)].flat();
        if (types.includes('string')) {
          const value = String(baseline[name] ?? 'x');
          cases.push(
            {
              ...base,
              ...invalid,
              label: `${name} with NUL`,
              body: JSON.stringify({ ...baseline, [name]: `${value.slice(0, 1)}${NUL}${value.slice(1)}` }),
            },
            {
              ...base,
              ...invalid,
              label: `${name} ending in NUL`,
              body: JSON.stringify({ ...baseline, [name]: `${value}${NUL}` }),
            },
            {
              ...base,
              ...invalid,
              label: `${name} with invalid UTF-8`,
              body: withInvalidUtf8(JSON.stringify({ ...baseline, [name]: `${value}${MARK}` })),
            },
          );
          if (schema.format === 'uuid') {
            for (const [label, spoiled] of [
              ['trailing space', `${value} `],
              ['trailing newline', `${value}\n`],
              ['trailing tab', `${value}\t`],
              ['leading space', ` ${value}`],
              ['no-break space', `${value}\u00a0`],
            ] as const)
              cases.push({
                ...base,
                ...invalid,
                label: `${name} with ${label}`,
                body: JSON.stringify({ ...baseline, [name]: spoiled }),
              });
          }
        }
        if (types.includes('array')) {
          cases.push(
            {
              ...base,
              ...invalid,
              label: `${name} item with NUL`,
              body: JSON.stringify({ ...baseline, [name]: [`roles:read${NUL}`] }),
            },
            {
              ...base,
              ...invalid,
              label: `${name} item with invalid UTF-8`,
              body: withInvalidUtf8(JSON.stringify({ ...baseline, [name]: [`roles:read${MARK}`] })),
            },
          );
        }
      }
      // A NUL in a key is refused as well.
      cases.push({ ...base, ...invalid, label: 'key with NUL', body: JSON.stringify({ ...baseline, [`k${NUL}`]: 1 }) });
    }
    expect(cases.length).toBeGreaterThan(100);
    expect(await run(cases)).toEqual([]);
  }, 300_000);

  it('service bodies: one byte over 1 MiB is 413 PAYLOAD_TOO_LARGE and writes nothing; exactly 1 MiB is read (a 4xx from validation at most)', async () => {
    const cases: Case[] = [];
    for (const op of withBody()) {
      const path = concrete(op);
      const json = JSON.stringify(exampleOf(walk, op.body!));
      cases.push(
        {
          method: op.method,
          path,
          label: '1 MiB + 1',
          body: padded(json, MIB + 1),
          allowed: only(413),
          code: 'PAYLOAD_TOO_LARGE',
        },
        {
          method: op.method,
          path,
          label: '1 MiB + 1 of invalid UTF-8',
          body: Buffer.alloc(MIB + 1, 0xff),
          allowed: only(413),
          code: 'PAYLOAD_TOO_LARGE',
        },
        // Within the limit: accepted, then the route decides (it may create the example role or key, or refuse it).
        {
          method: op.method,
          path,
          label: 'exactly 1 MiB',
          body: padded(json, MIB),
          allowed: (s) => s < 500 && s !== 413,
          mayWrite: true,
        },
      );
      // A list body has no field of its own to fill.
      const [field] = propertiesOf(walk, op.body!);
      if (field)
        cases.push({
          method: op.method,
          path,
          label: 'a 1 MiB string field',
          body: JSON.stringify({ ...(exampleOf(walk, op.body!) as object), [field[0]]: 'x'.repeat(MIB - 1024) }),
          allowed: only(400),
          code: 'VALIDATION_ERROR',
        });
    }
    const problems = await run(cases);
    expect(problems).toEqual([]);
  });

  it('path parameters: NUL, invalid UTF-8, UUIDs with whitespace, traversal, over-long or not v4: 400 (or 404 for another path), nothing written', async () => {
    const cases: Case[] = [];
    const id = crypto.randomUUID();
    const spoiled = [
      ['NUL', '%00'],
      ['NUL after a UUID', `${id}%00`],
      ['invalid UTF-8', '%FF%FE'],
      ['invalid UTF-8 after a UUID', `${id}%C3%28`],
      ['a malformed escape', `${id}%`],
      ['trailing space', `${id}%20`],
      ['trailing newline', `${id}%0A`],
      ['trailing tab', `${id}%09`],
      ['leading space', `%20${id}`],
      ['trailing plus', `${id}+`],
      ['traversal', '..%2F..%2Fhealth'],
      ['4 KiB', 'a'.repeat(4096)],
      ['a v1 UUID', 'c232ab00-9414-11ec-b3c8-9f6bdeced846'],
      ['a UUID without dashes', id.replaceAll('-', '')],
      ['a UUID in braces', `%7B${id}%7D`],
      ['SQL', "'%20or%201=1--"],
    ] as const;
    for (const op of withParams()) {
      const body = op.body ? JSON.stringify(exampleOf(walk, op.body)) : undefined;
      for (const param of op.pathParams) {
        for (const [label, value] of spoiled) {
          cases.push({
            method: op.method,
            path: concrete(op, { [param]: value }),
            body,
            label: `${param}: ${label}`,
            allowed: only(400, 404),
          });
        }
      }
    }
    expect(await run(cases)).toEqual([]);
  });

  it('query parameters: unknown (__proto__, constructor), repeated, wrong types, NUL, invalid UTF-8, over-long: 400, nothing written', async () => {
    const cases: Case[] = [];
    for (const op of withQuery()) {
      const path = concrete(op);
      for (const [label, query] of [
        ['unknown __proto__', '__proto__=1'],
        ['unknown constructor', 'constructor[prototype][polluted]=1'],
        ['unknown field', 'tenantId=x'],
        ['repeated limit', 'limit=1&limit=2'],
        ['limit NUL', 'limit=%00'],
        ['limit not a number', 'limit=ten'],
        ['limit negative', 'limit=-1'],
        ['limit huge', 'limit=1e308'],
        ['limit fraction', 'limit=1.5'],
        ['cursor NUL', 'cursor=%00'],
        ['cursor invalid UTF-8', 'cursor=%FF%FE'],
        ['cursor garbage', 'cursor=not-a-cursor'],
        ['cursor over-long', `cursor=${'a'.repeat(4096)}`],
        [
          'cursor of NUL JSON',
          `cursor=${Buffer.from(JSON.stringify({ createdAt: `2020-01-01T00:00:00Z${NUL}`, id: crypto.randomUUID() })).toString('base64url')}`,
        ],
        [
          'cursor with a UUID and a space',
          `cursor=${Buffer.from(JSON.stringify({ createdAt: '2020-01-01T00:00:00Z', id: `${crypto.randomUUID()} ` })).toString('base64url')}`,
        ],
        ['cursor deep JSON', `cursor=${Buffer.from(deepArray(200)).toString('base64url')}`],
      ] as const) {
        cases.push({
          method: op.method,
          path: `${path}?${query}`,
          label,
          allowed: only(400),
          code: 'VALIDATION_ERROR',
        });
      }
    }
    expect(await run(cases)).toEqual([]);
  });

  describe("the auth library's routes", () => {
    /**
     * Routes that read nothing from the body: sign-out signs out whatever the
     * body says, the OAuth callback redirects to the error page. Junk of the
     * right encoding is no error there; NUL, bad UTF-8, depth and size are.
     */
    const BODY_IGNORED = new Set(['/api/auth/sign-out', '/api/auth/callback/google']);

    /**
     * The library's POST routes that read a body, from the OpenAPI document:
     * the rows with a body schema, and the two that read a body they do not
     * check (BODY_IGNORED). What the library mounts beyond the rows answers
     * 404 (tests/library/routes.test.ts).
     */
    function libraryPostRoutes(): string[] {
      return walk.operations
        .filter((op) => op.library && op.method === 'POST')
        .map((op) => concrete(op, { id: 'google' }))
        .filter((path) => BODY_IGNORED.has(path) || walk.operations.some((op) => op.body && op.path === path));
    }

    it('walks the library endpoints that take a body', () => {
      const paths = libraryPostRoutes();
      expect(paths).toEqual(
        expect.arrayContaining([
          '/api/auth/sign-up/email',
          '/api/auth/sign-in/email',
          '/api/auth/request-password-reset',
          '/api/auth/organization/create',
          '/api/auth/organization/invite-member',
          '/api/auth/update-user',
        ]),
      );
      expect(paths.length).toBeGreaterThan(25);
    });

    /** Each string field of an object schema (nested objects' too), by its dotted path. */
    function stringFields(schema: Record<string, any>, prefix = ''): string[] {
      return propertiesOf(walk, schema).flatMap(([name, field]) => {
        const types = [field.type, ...(field.anyOf ?? []).map((alt: { type?: string }) => alt.type)].flat();
        if (field.properties) return stringFields(field, `${prefix}${name}.`);
        return types.includes('string') ? [`${prefix}${name}`] : [];
      });
    }

    /** `{ data: { name: value } }` for `data.name`. */
    const nested = (path: string, value: string): Record<string, unknown> =>
      path.split('.').reduceRight<unknown>((inner, key) => ({ [key]: inner }), value) as Record<string, unknown>;

    it("every string field of the library's bodies and query strings refuses control characters and oversized values: 400 VALIDATION_ERROR naming it, nothing written", async () => {
      // Signed in just now: the sensitive rows let the request through to validation.
      const caller = await signedInUser(t);
      const spoiled = [
        ['a control character', 'a\u0001b'],
        ['a line break', 'a\nb'],
        ['DEL', 'a\u007fb'],
        ['64 KiB', 'a'.repeat(65_536)],
      ] as const;
      const cases: Case[] = [];
      const fields: string[] = [];
      for (const op of walk.operations.filter((candidate) => candidate.library)) {
        const path = concrete(op, { id: 'google' });
        for (const name of op.body ? stringFields(op.body) : []) {
          fields.push(`${op.key} body.${name}`);
          for (const [label, value] of spoiled)
            cases.push({
              method: op.method,
              path,
              label: `body.${name} with ${label}`,
              body: JSON.stringify(nested(name, value)),
              jar: caller.jar,
              allowed: only(400),
              code: 'VALIDATION_ERROR',
              detail: `body.${name}`,
            });
        }
        for (const name of op.query ? stringFields(op.query) : []) {
          fields.push(`${op.key} query.${name}`);
          for (const [label, value] of spoiled)
            cases.push({
              method: op.method,
              path: `${path}?${name}=${encodeURIComponent(value)}`,
              label: `query.${name} with ${label}`,
              jar: caller.jar,
              allowed: only(400),
              code: 'VALIDATION_ERROR',
              detail: `query.${name}`,
            });
        }
      }
      // The walk reached the fields people type (not an empty walk passing vacuously).
      expect(fields).toEqual(
        expect.arrayContaining([
          'POST /api/auth/sign-up/email body.email',
          'POST /api/auth/sign-up/email body.name',
          'POST /api/auth/organization/create body.name',
          'POST /api/auth/organization/update body.data.name',
          'POST /api/auth/passkey/update-passkey body.name',
          'GET /api/auth/organization/list-members query.filterValue',
        ]),
      );
      expect(fields.length).toBeGreaterThanOrEqual(50);
      expect(await run(cases)).toEqual([]);
    }, 300_000);

    it('NUL, invalid UTF-8, deep nesting, wrong types, 1 MiB + 1: a 4xx in the shape, nothing written', async () => {
      const cases: Case[] = [];
      // Field names across the library's bodies, so each hostile value lands where a route reads.
      const fields = {
        email: 'someone@example.test',
        password: 'correct horse battery staple',
        newPassword: 'another horse battery staple',
        name: 'Name',
        slug: 'a-slug',
        organizationId: org.id,
        memberIdOrEmail: 'someone@example.test',
        invitationId: crypto.randomUUID(),
        token: 'x',
        data: { name: 'x' },
        role: 'member',
        currentPassword: 'x',
      };
      for (const path of libraryPostRoutes()) {
        const base = { method: 'POST', path, jar: bystander.jar };
        for (const name of Object.keys(fields)) {
          cases.push({
            ...base,
            label: `${name} with NUL`,
            body: JSON.stringify({ ...fields, [name]: `x${NUL}` }),
            allowed: only(400),
            code: 'VALIDATION_ERROR',
          });
          cases.push({
            ...base,
            label: `${name} with invalid UTF-8`,
            body: withInvalidUtf8(JSON.stringify({ ...fields, [name]: `x${MARK}` })),
            allowed: only(400),
            code: 'VALIDATION_ERROR',
          });
        }
        cases.push(
          {
            ...base,
            label: 'deep nesting',
            body: JSON.stringify({ ...fields, data: '@@DEEP@@' }).replace('"@@DEEP@@"', deepObject(10_000)),
            allowed: only(400),
            code: 'VALIDATION_ERROR',
          },
          {
            ...base,
            label: 'deep array',
            body: JSON.stringify({ ...fields, metadata: '@@DEEP@@' }).replace('"@@DEEP@@"', deepArray(100_000)),
            allowed: only(400),
            code: 'VALIDATION_ERROR',
          },
          { ...base, label: 'malformed JSON', body: '{"email":', allowed: is4xx },
          { ...base, label: '1 MiB + 1', body: padded('{}', MIB + 1), allowed: only(413), code: 'PAYLOAD_TOO_LARGE' },
        );
        if (!BODY_IGNORED.has(path)) {
          cases.push(
            {
              ...base,
              label: 'wrong types',
              body: JSON.stringify(Object.fromEntries(Object.keys(fields).map((name) => [name, 12345]))),
              allowed: is4xx,
            },
            {
              ...base,
              label: 'arrays for strings',
              body: JSON.stringify(Object.fromEntries(Object.keys(fields).map((name) => [name, ['x']]))),
              allowed: is4xx,
            },
          );
        }
      }
      expect(await run(cases)).toEqual([]);
    }, 300_000);

    it('unknown fields (__proto__, constructor) and exactly 1 MiB: never a 5xx, nothing polluted; refused ones write nothing', async () => {
      const problems: string[] = [];
      for (const path of libraryPostRoutes()) {
        for (const [label, body] of [
          [
            '__proto__ and constructor',
            '{"__proto__":{"polluted":"yes","role":"superadmin"},"constructor":{"prototype":{"polluted":"yes"}}}',
          ],
          ['exactly 1 MiB', padded('{}', MIB)],
        ] as const) {
          const before = await fingerprint(t);
          const res = await send({ method: 'POST', path, body, label, jar: bystander.jar });
          const text = await res.text();
          if (res.status >= 500 || res.status === 413)
            problems.push(`${label} ${path}: ${res.status} ${text.slice(0, 200)}`);
          if (res.status >= 400 && res.status < 500) {
            for (const problem of contractProblems(res.status, res.headers.get('content-type') ?? '', text))
              problems.push(`${label} ${path}: ${problem}`);
            const writes = writesBetween(before, await fingerprint(t));
            if (writes) problems.push(`${label} ${path}: refused, yet ${writes}`);
          }
          if (polluted()) problems.push(`${label} ${path}: Object.prototype polluted`);
        }
      }
      expect(problems).toEqual([]);
      // Nobody became a superadmin through `__proto__.role`.
      const roles = await t.db.selectFrom('users').select('role').where('id', '!=', owner.id).execute();
      expect(roles.every((row) => row.role === 'user')).toBe(true);
    });
  });

  describe('over a raw socket (a real listener)', () => {
    const head = (method: string, path: string, extra: string) =>
      `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: ${APP_ORIGIN}\r\nCookie: ${owner.jar.header()}\r\n${extra}\r\n`;
    const roleBody = () =>
      JSON.stringify({ name: `Smuggled ${crypto.randomUUID().slice(0, 6)}`, permissions: ['roles:read'] });

    /** Every response is a 4xx in the contract's shape, at least one came back, and nothing was written. */
    async function expectRefusedOverSocket(
      label: string,
      payload: Buffer | string,
      options: { end?: boolean; waitMs?: number; statuses?: number[] } = {},
    ) {
      const before = await fingerprint(t);
      const { bytes } = await rawExchange(port, payload, { waitMs: options.waitMs ?? 3000, end: options.end });
      const responses = parseResponses(bytes);
      expect(
        responses.length,
        `${label}: no response in ${JSON.stringify(bytes.toString('latin1').slice(0, 300))}`,
      ).toBeGreaterThan(0);
      for (const response of responses) {
        // Node's parser refusals keep their HTTP status (408, 431) with the contract's body (docs/security.md "Hostile input").
        expect(
          contractProblems(response.status, response.headers['content-type'] ?? '', response.body, is4xx, [408, 431]),
          `${label}: ${response.status} ${response.body}`,
        ).toEqual([]);
        if (options.statuses) expect(options.statuses, `${label}: status`).toContain(response.status);
      }
      const after = await fingerprint(t);
      expect(counts(after), `${label}: rows`).toEqual(counts(before));
      expect(after, `${label}: nothing written`).toEqual(before);
      return responses;
    }

    it('a Content-Length shorter than the body: the cut body is malformed JSON (400) and the rest is not a request (400)', async () => {
      const body = roleBody();
      await expectRefusedOverSocket(
        'CL short',
        head('POST', '/api/roles', `Content-Type: application/json\r\nContent-Length: ${body.length - 5}\r\n`) + body,
        { statuses: [400] },
      );
    });

    it('a Content-Length longer than the body: nothing happens until the body is complete; a client that stops sending gets 400, one that stalls 408', async () => {
      const body = roleBody();
      const payload =
        head('POST', '/api/roles', `Content-Type: application/json\r\nContent-Length: ${body.length + 64}\r\n`) + body;
      await expectRefusedOverSocket('CL long, then the client half-closes', payload, { end: true, statuses: [400] });
      await expectRefusedOverSocket('CL long, the client stalls', payload, { waitMs: 4000, statuses: [408] });
    });

    it('a Content-Length over 1 MiB: 413 at once, before any body byte arrives', async () => {
      await expectRefusedOverSocket(
        'CL over the limit',
        head('POST', '/api/roles', `Content-Type: application/json\r\nContent-Length: ${MIB + 1}\r\n`),
        { statuses: [413] },
      );
    });

    it('Content-Length and Transfer-Encoding together: 400, the body never reaches a handler', async () => {
      const body = roleBody();
      const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
      await expectRefusedOverSocket(
        'CL + TE',
        head(
          'POST',
          '/api/roles',
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n`,
        ) + chunked,
        { statuses: [400] },
      );
      await expectRefusedOverSocket(
        'TE + CL',
        head(
          'POST',
          '/api/roles',
          `Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: ${chunked.length}\r\n`,
        ) + chunked,
        { statuses: [400] },
      );
      await expectRefusedOverSocket(
        'two Content-Lengths',
        head(
          'POST',
          '/api/roles',
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nContent-Length: 5\r\n`,
        ) + body,
        { statuses: [400] },
      );
    });

    it('a 32 KiB header: 431 in the contract shape', async () => {
      await expectRefusedOverSocket(
        '32 KiB header',
        `GET /api/roles HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${'a'.repeat(32 * 1024)}\r\n\r\n`,
        { statuses: [431] },
      );
      await expectRefusedOverSocket(
        '32 KiB cookie',
        `GET /api/roles HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ${owner.jar.header()}; junk=${'a'.repeat(32 * 1024)}\r\n\r\n`,
        { statuses: [431] },
      );
    });

    it('raw NUL and invalid UTF-8 bytes in the request line and headers: 400', async () => {
      for (const [label, bytes] of [
        ['NUL in the path', Buffer.from([0x00])],
        ['0xFF 0xFE in the path', Buffer.from([0xff, 0xfe])],
        ['a space inside the path', Buffer.from(' x')],
      ] as const) {
        const payload = Buffer.concat([
          Buffer.from(`DELETE /api/roles/${crypto.randomUUID()}`),
          bytes,
          Buffer.from(` HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: ${owner.jar.header()}\r\nConnection: close\r\n\r\n`),
        ]);
        await expectRefusedOverSocket(label, payload, { statuses: [400] });
      }
      await expectRefusedOverSocket(
        'NUL in a header',
        Buffer.concat([
          Buffer.from(`GET /api/roles HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a`),
          Buffer.from([0x00]),
          Buffer.from('b\r\n\r\n'),
        ]),
        { statuses: [400] },
      );
    });

    it('the listener still answers afterwards', async () => {
      const res = await fetch(`http://127.0.0.1:${port}/api/health`);
      expect(res.status).toBe(200);
    });
  });
});
