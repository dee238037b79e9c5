/**
 * Helpers of the security suites (tests/security): the database's
 * fingerprint (to prove a refused request wrote nothing), the contract's
 * error shape, and the shape of a JSON value (to compare two answers
 * without their values).
 */
import { sql } from 'kysely';
import { expect } from 'vitest';
import { ERROR_STATUS } from '../../src/shared/errors.js';
import type { TestApp } from '../support/app.js';

const tableLists = new WeakMap<object, string[]>();

/** Every table's row count and a digest of its rows, in one statement, read as the schema owner (PGlite: the superuser, so RLS hides nothing). */
export async function fingerprint(t: Pick<TestApp, 'database'>): Promise<Record<string, string>> {
  return t.database.withOwner(async (owner) => {
    let tables = tableLists.get(t.database);
    if (!tables) {
      const { rows } = await sql<{ name: string }>`
        select table_name as name from information_schema.tables
        where table_schema = 'public' and table_type = 'BASE TABLE' and table_name not like 'kysely_%'
        order by table_name`.execute(owner);
      tables = rows.map((row) => row.name);
      tableLists.set(t.database, tables);
    }
    const parts = tables.map(
      (name) =>
        sql`select ${name}::text as name, count(*)::int as n, md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as digest from ${sql.table(name)} t`,
    );
    const { rows } = await sql<{
      name: string;
      n: number;
      digest: string;
    }>`${sql.join(parts, sql` union all `)}`.execute(owner);
    return Object.fromEntries(rows.map((row) => [row.name, `${row.n}:${row.digest}`]));
  });
}

/** Rows per table, for messages. */
export function counts(print: Record<string, string>): Record<string, number> {
  return Object.fromEntries(Object.entries(print).map(([table, value]) => [table, Number(value.split(':')[0])]));
}

/** What changed between two fingerprints, for a problem list: null when nothing did. */
export function writesBetween(before: Record<string, string>, after: Record<string, string>): string | null {
  const changed = Object.keys(after).filter((table) => after[table] !== before[table]);
  if (!changed.length) return null;
  return `wrote to ${changed.join(', ')} (${JSON.stringify(counts(before))} -> ${JSON.stringify(counts(after))})`;
}

/** What is wrong with an error answer, if anything: empty when it is a 4xx (or `allowed`) in the contract's shape. */
export function contractProblems(
  status: number,
  contentType: string,
  text: string,
  allowed: (status: number) => boolean = (s) => s >= 400 && s < 500,
  listenerStatuses: number[] = [],
): string[] {
  const problems: string[] = [];
  if (!allowed(status)) problems.push(`status ${status}`);
  if (!/^application\/json/.test(contentType)) problems.push(`content type "${contentType}"`);
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    return [...problems, `body is not JSON: ${JSON.stringify(text.slice(0, 200))}`];
  }
  const keys = body && typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : [];
  if (
    typeof body?.code !== 'string' ||
    typeof body?.message !== 'string' ||
    keys.some((key) => !['code', 'message', 'details'].includes(key))
  ) {
    problems.push(`body is not { code, message, details? }: ${text.slice(0, 200)}`);
  } else {
    if (
      body.details !== undefined &&
      (!Array.isArray(body.details) ||
        body.details.some(
          (d: any) => typeof d?.path !== 'string' || typeof d?.message !== 'string' || Object.keys(d).length !== 2,
        ))
    ) {
      problems.push(`details are not [{ path, message }]: ${JSON.stringify(body.details).slice(0, 200)}`);
    }
    if (
      body.code in ERROR_STATUS &&
      ERROR_STATUS[body.code as keyof typeof ERROR_STATUS] !== status &&
      !(listenerStatuses.includes(status) && body.code === 'VALIDATION_ERROR')
    ) {
      problems.push(`${body.code} with status ${status}`);
    }
  }
  if (/\bat [\w.<>]+ \(|node_modules|\bselect\b.*\bfrom\b|\binsert into\b/i.test(text))
    problems.push(`leaks internals: ${text.slice(0, 200)}`);
  return problems;
}

export interface ErrorAnswer {
  status: number;
  body: { code: string; message: string; details?: { path: string; message: string }[] };
}

/**
 * A 4xx in the contract's shape: `{ code, message, details? }` and nothing
 * else. Codes of the service map to their one status (docs/api.md "Errors");
 * the auth library's own codes (same shape) are its own.
 */
export async function expectContractError(
  res: Response,
  label: string,
  allowed: (status: number) => boolean = (s) => s >= 400 && s < 500,
): Promise<ErrorAnswer> {
  const text = await res.text();
  let body: any = null;
  try {
    body = JSON.parse(text);
  } catch {
    // reported below
  }
  expect(allowed(res.status), `${label}: status ${res.status} ${text.slice(0, 300)}`).toBe(true);
  expect(res.headers.get('content-type') ?? '', `${label}: content type`).toMatch(/^application\/json/);
  expect(body, `${label}: body ${text.slice(0, 300)}`).toEqual({
    code: expect.any(String),
    message: expect.any(String),
    ...(body && 'details' in body ? { details: expect.any(Array) } : {}),
  });
  for (const detail of body.details ?? [])
    expect(detail, `${label}: detail`).toEqual({ path: expect.any(String), message: expect.any(String) });
  if (body.code in ERROR_STATUS)
    expect(res.status, `${label}: ${body.code} has one status`).toBe(
      ERROR_STATUS[body.code as keyof typeof ERROR_STATUS],
    );
  // Never a stack, SQL or driver text.
  expect(text, `${label}: leaks`).not.toMatch(
    /\bat [\w.<>]+ \(|node_modules|select |insert |update .* set|PGlite|postgres/i,
  );
  return { status: res.status, body };
}

/** The shape of a JSON value: types and keys, recursively, without the values. */
export function shapeOf(value: unknown): unknown {
  if (value === null) return 'null';
  if (Array.isArray(value)) return value.length === 0 ? [] : [shapeOf(value[0])];
  if (typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value as object)
        .sort()
        .map((key) => [key, shapeOf((value as Record<string, unknown>)[key])]),
    );
  }
  return typeof value;
}

/** Set-Cookie names and attributes (values removed): what an observer of the response headers sees. */
export function cookieShape(res: Response): string[] {
  return res.headers
    .getSetCookie()
    .map((header) => {
      const [pair = '', ...attributes] = header.split(';').map((part) => part.trim());
      const name = pair.slice(0, pair.indexOf('='));
      const kept = attributes
        .map((a) => a.toLowerCase())
        .filter((a) => !a.startsWith('expires=') && !a.startsWith('max-age='));
      return [name, ...kept.sort()].join('; ');
    })
    .sort();
}

/** Fisher-Yates, so the order of paired measurements never favours one side. */
export function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
