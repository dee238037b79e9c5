import type { Context } from 'hono';
import type { z } from 'zod';
import { ApiError, type ErrorDetail } from '../shared/errors.js';
import { hasControlCharacters } from '../shared/text.js';
import type { AppEnv } from '../shared/types.js';
import type { JsonObject, LibraryRoute } from './row.js';

export type { JsonObject } from './row.js';

/** What a library request carries, validated once by its route's schemas. */
export interface LibraryInput {
  /** The JSON body (null for a route that takes none or was sent none it reads). */
  body: JsonObject | null;
  query: Record<string, string>;
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;
const MAX_QUERY_VALUE = 2048;
const inputs = new WeakMap<Context<AppEnv>, Promise<LibraryInput>>();

function invalid(details: ErrorDetail[]): ApiError {
  return new ApiError('VALIDATION_ERROR', 'Request validation failed', { details });
}

function check<T>(schema: z.ZodType<T> | undefined, value: unknown, prefix: string): T {
  if (!schema) return value as T;
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw invalid(
    result.error.issues.map((issue) => ({
      path: [prefix, ...issue.path.map(String)].join('.'),
      message: issue.message,
    })),
  );
}

function readQuery(c: Context<AppEnv>, route: LibraryRoute): Record<string, string> {
  const query: Record<string, string> = {};
  for (const [name, value] of new URL(c.req.url).searchParams) {
    // One value a name: the library would read the first, a filter in front of it another.
    if (name in query) throw invalid([{ path: `query.${name}`, message: 'must be given once' }]);
    if (hasControlCharacters(name) || hasControlCharacters(value) || value.length > MAX_QUERY_VALUE) {
      throw invalid([
        { path: `query.${name}`, message: `must be at most ${MAX_QUERY_VALUE} characters, without control characters` },
      ]);
    }
    query[name] = value;
  }
  return check(route.query, query, 'query') as Record<string, string>;
}

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(?:;|$)/i;

/** A form's fields, each given once (a second value would be read by one reader and not another). */
async function readForm(c: Context<AppEnv>, schema: z.ZodType): Promise<JsonObject> {
  const raw = c.req.raw;
  if (!FORM_TYPE.test(c.req.header('content-type') ?? ''))
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/x-www-form-urlencoded');
  const form: JsonObject = {};
  for (const [name, value] of new URLSearchParams(raw.body ? await raw.clone().text() : '')) {
    if (name in form) throw invalid([{ path: `body.${name}`, message: 'must be given once' }]);
    form[name] = value;
  }
  return check(schema, form, 'body') as JsonObject;
}

async function readBody(c: Context<AppEnv>, route: LibraryRoute): Promise<JsonObject | null> {
  if (route.method === 'POST' && route.foreignForm) return readForm(c, route.foreignForm);
  if (route.method !== 'POST' || !route.body) return null;
  const raw = c.req.raw;
  const type = c.req.header('content-type') ?? '';
  const text = raw.body ? await raw.clone().text() : '';
  if (text !== '' && !JSON_TYPE.test(type))
    throw new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
  let parsed: unknown = {};
  if (text.trim() !== '') {
    try {
      parsed = JSON.parse(text);
    } catch {
      throw invalid([{ path: '', message: 'malformed JSON' }]);
    }
  }
  return check(route.body, parsed, 'body') as JsonObject;
}

/**
 * The request's body and query checked against the route's schemas:
 * 400 VALIDATION_ERROR, never the library's 500, for ids that are
 * not UUIDs, unbounded names, control characters, unknown sort fields. Read
 * once per request (the guard's organization step reads it first).
 */
export function libraryInput(c: Context<AppEnv>, route: LibraryRoute): Promise<LibraryInput> {
  let input = inputs.get(c);
  if (!input) {
    input = (async () => ({ query: readQuery(c, route), body: await readBody(c, route) }))();
    inputs.set(c, input);
  }
  return input;
}

/** The input with the organization the guard authorized written where the row says it travels. */
export function withOrganizationIn(route: LibraryRoute, organizationId: string, input: LibraryInput): LibraryInput {
  if (route.organization === 'query') {
    const { organizationSlug: _slug, ...query } = input.query;
    return { ...input, query: { ...query, organizationId } };
  }
  if (route.organization === 'body') {
    const { organizationSlug: _slug, ...body } = input.body ?? {};
    return { ...input, body: { ...body, organizationId } };
  }
  return input;
}
