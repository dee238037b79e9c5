/**
 * Hostile cursors on every list that takes one: the lists are found in the
 * OpenAPI document (every operation with a `cursor` query parameter), and
 * each gets the same table. A cursor PostgreSQL could not read (a time out
 * of its range, an offset beyond ±15:59, a year it has not, NUL, a bad
 * UUID, ...) is the client's 400 VALIDATION_ERROR naming `cursor`, never a
 * 500; the cursors it can read are served, and the same instant written
 * with different offsets serves the same page.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { createOrganization } from '../support/orgs.js';
import { type SignedInUser, signedInUser } from '../support/users.js';
import { createWebhook } from '../support/webhooks.js';
import { concrete, type Operation, walkRoutes } from './routes.js';
import { contractProblems } from './support.js';

const NUL = '\u0000';
const ID = '0f6c1a2e-8f0e-4c3b-9a55-3a2b1c0d9e8f';

/** A cursor as the pages write one: base64url of its JSON. */
const encode = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
const at = (createdAt: unknown, id: unknown = ID) => encode({ createdAt, id });

/** [label, the `cursor` query value as sent (before URL encoding)]. */
const HOSTILE: [string, string][] = [
  // Offsets PostgreSQL refuses ("time zone displacement out of range") or that are not offsets.
  ['offset +16:00', at('2024-01-01T00:00:00+16:00')],
  ['offset -16:00', at('2024-01-01T00:00:00-16:00')],
  ['offset +23:59', at('2024-01-01T00:00:00+23:59')],
  ['offset -23:59', at('2024-01-01T00:00:00-23:59')],
  ['offset +15:60', at('2024-01-01T00:00:00+15:60')],
  ['offset +99:99', at('2024-01-01T00:00:00+99:99')],
  ['offset hours only', at('2024-01-01T00:00:00+05')],
  ['offset without colon', at('2024-01-01T00:00:00+0530')],
  ['offset with seconds', at('2024-01-01T00:00:00+05:30:15')],
  ['offset with a Unicode minus', at('2024-01-01T00:00:00\u221205:00')],
  ['no offset', at('2024-01-01T00:00:00')],
  ['a zone name', at('2024-01-01T00:00:00 PST')],
  // Years PostgreSQL has not, or refuses.
  ['year 0', at('0000-01-01T00:00:00Z')],
  ['year 0 with an offset', at('0000-12-31T23:00:00-02:00')],
  ['year 10000', at('10000-01-01T00:00:00Z')],
  ['year 294277', at('294277-01-01T00:00:00Z')],
  ['expanded year', at('+275760-09-13T00:00:00Z')],
  ['negative year', at('-000001-01-01T00:00:00Z')],
  ['year 0 once in UTC', at('0001-01-01T00:00:00+01:00')],
  ['year 10000 once in UTC', at('9999-12-31T23:00:00-05:00')],
  ['past year 9999 by rounding', at('9999-12-31T23:59:59.9999999Z')],
  // Dates and clock times that do not exist.
  ['February 29 of a common year', at('2023-02-29T00:00:00Z')],
  ['February 30', at('2024-02-30T00:00:00Z')],
  ['April 31', at('2024-04-31T00:00:00Z')],
  ['month 0', at('2024-00-10T00:00:00Z')],
  ['month 13', at('2024-13-01T00:00:00Z')],
  ['day 0', at('2024-01-00T00:00:00Z')],
  ['hour 24', at('2024-01-01T24:00:00Z')],
  ['minute 60', at('2024-01-01T00:60:00Z')],
  ['leap second', at('2016-12-31T23:59:60Z')],
  ['seven fractional digits', at('2024-01-01T00:00:00.1234567Z')],
  ['300 fractional digits', at(`2024-01-01T00:00:00.${'9'.repeat(300)}Z`)],
  ['empty fraction', at('2024-01-01T00:00:00.Z')],
  // What PostgreSQL would read, but no cursor of ours is.
  ['infinity', at('infinity')],
  ['-infinity', at('-infinity')],
  ['epoch', at('epoch')],
  ['now', at('now')],
  ['a Julian day', at('J2451187')],
  ['a space for T', at('2024-01-01 00:00:00Z')],
  ['lower-case t and z', at('2024-01-01t00:00:00z')],
  ['a date alone', at('2024-01-01')],
  ['full-width digits', at('\uff12\uff10\uff12\uff14-01-01T00:00:00Z')],
  ['padded', at(' 2024-01-01T00:00:00Z ')],
  ['empty time', at('')],
  ['a number for the time', at(1_700_000_000_000)],
  ['null for the time', at(null)],
  ['an object for the time', at({ $date: '2024-01-01T00:00:00Z' })],
  // NUL, which PostgreSQL text refuses.
  ['NUL after the time', at(`2024-01-01T00:00:00Z${NUL}`)],
  ['NUL inside the time', at(`2024-01-01T00:00${NUL}:00Z`)],
  ['NUL in the id', at('2024-01-01T00:00:00Z', `${ID.slice(0, 8)}${NUL}${ID.slice(9)}`)],
  ['NUL as the cursor', NUL],
  ['NUL key', encode(`{"createdAt":"2024-01-01T00:00:00Z","id":"${ID}","\\u0000":1}`)],
  // Ids that are not UUIDs in the one form.
  ['not a UUID', at('2024-01-01T00:00:00Z', 'not-a-uuid')],
  ['UUID in braces', at('2024-01-01T00:00:00Z', `{${ID}}`)],
  ['UUID without hyphens', at('2024-01-01T00:00:00Z', ID.replaceAll('-', ''))],
  ['UUID one digit short', at('2024-01-01T00:00:00Z', ID.slice(0, -1))],
  ['UUID one digit long', at('2024-01-01T00:00:00Z', `${ID}0`)],
  ['UUID with a non-hex digit', at('2024-01-01T00:00:00Z', `${ID.slice(0, -1)}g`)],
  ['UUID as a URN', at('2024-01-01T00:00:00Z', `urn:uuid:${ID}`)],
  ['a number for the id', at('2024-01-01T00:00:00Z', 42)],
  ['no id', encode({ createdAt: '2024-01-01T00:00:00Z' })],
  // Envelopes that are not a cursor.
  ['empty', ''],
  ['garbage', 'not-a-cursor'],
  ['punctuation', '!!!'],
  ['over 512 characters', 'a'.repeat(513)],
  ['not JSON', encode('not json')],
  ['JSON null', encode('null')],
  ['JSON array', encode([`2024-01-01T00:00:00Z`, ID])],
  ['empty object', encode({})],
  ['an extra key', encode({ createdAt: '2024-01-01T00:00:00Z', id: ID, extra: 1 })],
  ['a __proto__ key', encode(`{"createdAt":"2024-01-01T00:00:00Z","id":"${ID}","__proto__":{"x":1}}`)],
  ['invalid UTF-8', Buffer.from([0xc3, 0x28, 0xff, 0xfe]).toString('base64url')],
  ['invalid UTF-8 as sent', '\ufffd\ufffe'],
];

/** Cursors PostgreSQL reads: each is served (200). */
const ACCEPTED: [string, string][] = [
  ['as the pages write one', at('2024-01-01T00:00:00.000000Z')],
  ['year 1', at('0001-01-01T00:00:00.000000Z')],
  ['the last microsecond of year 9999', at('9999-12-31T23:59:59.999999Z')],
  ['offset +15:59', at('2024-02-29T12:00:00+15:59')],
  ['offset -15:59', at('2024-01-01T00:00:00-15:59')],
  ['year 1 through an offset', at('0001-01-01T15:59:00+15:59')],
  ['year 9999 through an offset', at('9999-12-31T08:00:00-15:59')],
  ['no fraction', at('2024-01-01T00:00:00Z')],
  ['upper-case UUID', at('2024-01-01T00:00:00Z', ID.toUpperCase())],
];

/** One instant, three spellings: each must serve the same page. */
const SAME_INSTANT = ['2100-01-01T00:00:00.000000Z', '2100-01-01T15:59:00+15:59', '2099-12-31T08:01:00.0-15:59'];

describe('hostile cursors on every list', () => {
  let t: TestApp;
  let caller: SignedInUser;
  let lists: Operation[];
  let paths: Map<string, string>;

  beforeAll(async () => {
    t = await createTestApp({ env: { DOCS_ENABLED: 'true', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
    // One caller reaches every list: a superadmin (the admin lists) who owns an organization (its lists).
    caller = await signedInUser(t);
    await t.database.withOwner((owner) =>
      owner.updateTable('users').set({ role: 'superadmin' }).where('id', '=', caller.id).execute(),
    );
    await createOrganization(t, caller);
    const webhook = await createWebhook(t, caller, { url: 'http://127.0.0.1:9/hook', events: ['*'] });
    await expectStatus(await call(t, `/api/webhooks/${webhook.id}/test`, { method: 'POST', jar: caller.jar }), 202);
    const walk = await walkRoutes(t, caller.jar);
    lists = walk.operations.filter((op) => op.query?.properties?.cursor);
    paths = new Map(lists.map((op) => [op.key, concrete(op, { id: webhook.id })]));
  });
  afterAll(() => t?.close());

  const page = (op: Operation, cursor: string, limit = 100) =>
    call(t, `${paths.get(op.key)}?limit=${limit}&cursor=${encodeURIComponent(cursor)}`, { jar: caller.jar });

  it('finds every list that takes a cursor, each serving its first page to the caller', async () => {
    expect(lists.map((op) => op.key).sort()).toEqual(
      expect.arrayContaining(['GET /api/admin/users', 'GET /api/audit-logs', 'GET /api/webhooks/{id}/deliveries']),
    );
    for (const op of lists) {
      const first = await expectStatus<{ items: unknown[] }>(
        await call(t, `${paths.get(op.key)}?limit=1`, { jar: caller.jar }),
        200,
      );
      expect(first.items, op.key).toHaveLength(1);
    }
  });

  it('refuses each hostile cursor on each list with 400 VALIDATION_ERROR naming `cursor`', async () => {
    const problems: string[] = [];
    for (const op of lists) {
      for (const [label, cursor] of HOSTILE) {
        const res = await page(op, cursor);
        const text = await res.text();
        const found = contractProblems(res.status, res.headers.get('content-type') ?? '', text, (s) => s === 400);
        const body = found.length ? null : (JSON.parse(text) as { code: string; details?: { path: string }[] });
        if (body && body.code !== 'VALIDATION_ERROR') found.push(`code ${body.code}`);
        if (body && body.details?.[0]?.path !== 'cursor') found.push(`details ${JSON.stringify(body.details)}`);
        if (found.length) problems.push(`${op.key} ${label}: ${found.join('; ')} ${text.slice(0, 120)}`);
      }
    }
    expect(lists.length * HOSTILE.length).toBeGreaterThanOrEqual(3 * 70);
    expect(problems).toEqual([]);
  });

  it('serves every cursor PostgreSQL reads, and the same instant in any offset serves the same page', async () => {
    for (const op of lists) {
      for (const [label, cursor] of ACCEPTED) expect((await page(op, cursor)).status, `${op.key} ${label}`).toBe(200);
      const pages = [];
      for (const createdAt of SAME_INSTANT)
        pages.push(await expectStatus<{ items: { id: string }[] }>(await page(op, at(createdAt)), 200));
      expect(pages[0]!.items.length, op.key).toBeGreaterThan(0);
      for (const other of pages.slice(1)) expect(other, op.key).toEqual(pages[0]);
    }
  });

  it("pages through with the list's own cursors, exactly as without them", async () => {
    for (const op of lists) {
      const all = await expectStatus<{ items: { id: string }[] }>(
        await call(t, `${paths.get(op.key)}?limit=100`, { jar: caller.jar }),
        200,
      );
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const res: Response = cursor
          ? await page(op, cursor, 1)
          : await call(t, `${paths.get(op.key)}?limit=1`, { jar: caller.jar });
        const next: { items: { id: string }[]; nextCursor: string | null } = await expectStatus(res, 200);
        seen.push(...next.items.map((item) => item.id));
        cursor = next.nextCursor;
      } while (cursor);
      expect(seen, op.key).toEqual(all.items.map((item) => item.id));
    }
  });
});
