/**
 * Both doors' routes as the OpenAPI document describes them (generated from
 * the same zod schemas and access declarations that guard them: the
 * service's routes and the auth library's rows under `/api/auth`): the
 * security suites walk this list instead of naming routes by hand, and check
 * it against `app.routes` so a route missing from the document fails the walk.
 */
import { expect } from 'vitest';
import { LIBRARY_ROUTES } from '../../src/library/routes.js';
import { PERMISSION_PATTERN } from '../../src/shared/permissions.js';
import type { TestApp } from '../support/app.js';
import { type CookieJar, call } from '../support/http.js';

type Schema = Record<string, any>;

export interface Operation {
  method: string;
  /** OpenAPI form: `/api/roles/{id}`. */
  path: string;
  key: string;
  access:
    | 'public'
    | 'optional-auth'
    | {
        session: true;
        platformRoles?: string[];
        activeOrganization?: boolean;
        permissions?: string[];
        stepUp?: boolean;
        allowedWhileScheduledForDeletion?: boolean;
      };
  /** One of the auth library's rows (src/library/routes.ts), served under `/api/auth`. */
  library: boolean;
  pathParams: string[];
  query: Schema | null;
  body: Schema | null;
  hasOwnCredentials: boolean;
}

export interface Walk {
  doc: Schema;
  operations: Operation[];
  resolve(schema: Schema): Schema;
}

/** `POST /api/auth/callback/{id}`: each served library row as its operation key. */
export const LIBRARY_KEYS: ReadonlySet<string> = new Set(
  LIBRARY_ROUTES.map((route) => `${route.method} /api/auth${route.path.replace(/:(\w+)/g, '{$1}')}`),
);

export async function walkRoutes(t: TestApp, jar?: CookieJar): Promise<Walk> {
  const res = await call(t, '/api/openapi.json', { jar });
  expect(res.status).toBe(200);
  const doc = (await res.json()) as Schema;
  const resolve = (schema: Schema): Schema => {
    let current = schema;
    while (current?.$ref)
      current = current.$ref
        .split('/')
        .slice(1)
        .reduce((node: Schema, part: string) => node[part], doc);
    return current;
  };
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Schema>)) {
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const parameters = ((op.parameters ?? []) as Schema[]).map(resolve);
      const queryParams = parameters.filter((p) => p.in === 'query');
      const bodySchema = op.requestBody ? resolve(op.requestBody.content?.['application/json']?.schema ?? {}) : null;
      operations.push({
        method: method.toUpperCase(),
        path,
        key: `${method.toUpperCase()} ${path}`,
        access: op['x-access'],
        library: LIBRARY_KEYS.has(`${method.toUpperCase()} ${path}`),
        pathParams: parameters.filter((p) => p.in === 'path').map((p) => p.name as string),
        query: queryParams.length
          ? {
              type: 'object',
              properties: Object.fromEntries(queryParams.map((p) => [p.name, resolve(p.schema ?? {})])),
            }
          : null,
        body: bodySchema,
        hasOwnCredentials:
          op['x-access'] === 'public' &&
          Array.isArray(op.security) &&
          op.security.length > 0 &&
          op.security.every((s: Schema) => Object.keys(s).length > 0),
      });
    }
  }
  // Every endpoint the app registers is in the document, the library's rows included (not the docs themselves).
  const documented = new Set(operations.map((op) => `${op.method} ${op.path.replace(/\{(\w+)\}/g, ':$1')}`));
  for (const route of t.app.routes) {
    if (route.method === 'ALL' || route.path === '/api/openapi.json' || route.path === '/api/docs') continue;
    if (route.path.startsWith('/api/test/')) continue;
    expect(documented, `${route.method} ${route.path} is not in the OpenAPI document`).toContain(
      `${route.method} ${route.path}`,
    );
  }
  // And every row of the library's is in it (the walk is not missing a door).
  const keys = new Set(operations.map((op) => op.key));
  for (const key of LIBRARY_KEYS) expect(keys, `${key}: a library row not in the document`).toContain(key);
  return { doc, operations, resolve };
}

/** The path with each `{param}` replaced. */
export function concrete(op: Operation, values: Record<string, string> = {}): string {
  return op.path.replace(/\{(\w+)\}/g, (_, name: string) => values[name] ?? crypto.randomUUID());
}

const PERMISSION_EXAMPLE = 'roles:read';

/** A value the schema accepts, built from the schema alone (every property, so refinements like "at least one field" hold). */
export function exampleOf(walk: Walk, input: Schema): unknown {
  const schema = walk.resolve(input);
  if (schema.const !== undefined) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum.find((v: unknown) => v !== null) ?? schema.enum[0];
  const alternatives = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  if (alternatives)
    return exampleOf(walk, alternatives.find((alt) => walk.resolve(alt).type !== 'null') ?? alternatives[0]!);
  if (schema.allOf) return Object.assign({}, ...(schema.allOf as Schema[]).map((part) => exampleOf(walk, part)));
  const type = Array.isArray(schema.type) ? schema.type.find((item: string) => item !== 'null') : schema.type;
  switch (type) {
    case 'object':
      return Object.fromEntries(
        Object.entries((schema.properties ?? {}) as Record<string, Schema>).map(([name, inner]) => [
          name,
          exampleOf(walk, inner),
        ]),
      );
    case 'array':
      return Array.from({ length: Math.max(1, schema.minItems ?? 1) }, () => exampleOf(walk, schema.items ?? {}));
    case 'integer':
    case 'number':
      return schema.minimum ?? schema.exclusiveMinimum ?? 1;
    case 'boolean':
      return true;
    case 'string': {
      if (schema.format === 'uuid') return crypto.randomUUID();
      if (schema.format === 'date-time') return new Date(Date.now() + 86_400_000).toISOString();
      if (schema.format === 'email') return 'someone@example.test';
      if (schema.pattern) {
        const pattern = new RegExp(schema.pattern);
        if (pattern.source === PERMISSION_PATTERN.source || pattern.test(PERMISSION_EXAMPLE)) return PERMISSION_EXAMPLE;
      }
      return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
    }
    default:
      return 'x';
  }
}

/** The top-level properties of an object schema, with their resolved schemas. */
export function propertiesOf(walk: Walk, input: Schema): [string, Schema][] {
  const schema = walk.resolve(input);
  return Object.entries((schema.properties ?? {}) as Record<string, Schema>).map(([name, inner]) => [
    name,
    walk.resolve(inner),
  ]);
}

/** A value of the wrong JSON type for `schema`. */
export function wrongTypesFor(schema: Schema): unknown[] {
  const types = new Set<string>([schema.type].flat().filter(Boolean));
  if (schema.anyOf) for (const alt of schema.anyOf as Schema[]) for (const type of [alt.type].flat()) types.add(type);
  const candidates: [string, unknown][] = [
    ['string', 12345],
    ['number', 'not a number'],
    ['integer', 'not a number'],
    ['boolean', 'true'],
    ['array', { '0': 'x' }],
    ['object', ['x']],
  ];
  const out: unknown[] = [];
  for (const [type, wrong] of candidates) if (types.has(type)) out.push(wrong);
  if (!types.has('null')) out.push(null);
  if (!types.has('object')) out.push({ nested: { value: 1 } });
  if (!types.has('array')) out.push([]);
  return out;
}
