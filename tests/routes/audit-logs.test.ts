import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { type CookieJar, call, expectError, expectStatus, UUID_V4 } from '../support/http.js';
import {
  auditRows,
  createOrganization,
  createRole,
  newMember,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/** GET /api/audit-logs, docs/api.md "Pagination" and "Audit actions" (organizations:read; `?limit=1..100&cursor=`; newest first). */

interface Entry {
  id: string;
  action: string;
  actorId: string | null;
  organizationId: string | null;
  metadata: Record<string, unknown>;
  createdAt: string;
}
interface Page {
  items: Entry[];
  nextCursor: string | null;
}

// Oracle: copied from the contract on purpose; the service must agree with it.
const ENTRY_FIELDS = ['action', 'actorId', 'createdAt', 'id', 'metadata', 'organizationId'];
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const b64 = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

describe('GET /api/audit-logs', () => {
  let t: TestApp;
  let org: TestOrganization;
  let member: TestMember;
  /** A custom role without organizations:read. */
  let outsider: TestMember;
  let other: TestOrganization;
  let otherEntryIds: string[];

  const get = (jar: CookieJar | undefined, query = '') => call(t, `/api/audit-logs${query}`, { jar });
  const getPage = async (jar: CookieJar, query = ''): Promise<Page> => expectStatus<Page>(await get(jar, query), 200);

  /** Every entry, following nextCursor with `limit`; fails on a loop. */
  async function allPages(jar: CookieJar, limit: number): Promise<{ pages: Page[]; items: Entry[] }> {
    const pages: Page[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const page = await getPage(jar, query);
      pages.push(page);
      cursor = page.nextCursor;
      if (pages.length > 1000) throw new Error('pagination does not end');
    } while (cursor);
    return { pages, items: pages.flatMap((p) => p.items) };
  }

  /** Creates and revokes keys through the API: real api_key.created / api_key.revoked entries. */
  async function makeEntries(o: TestOrganization, created: number, revoked: number): Promise<void> {
    for (let i = 0; i < created; i += 1) {
      const key = await expectStatus<{ id: string }>(
        await call(t, '/api/api-keys', { body: { name: `k${i}`, scopes: ['roles:read'] }, jar: o.owner.jar }),
        201,
      );
      if (i < revoked)
        await expectStatus(await call(t, `/api/api-keys/${key.id}`, { method: 'DELETE', jar: o.owner.jar }), 200);
    }
  }

  /**
   * Entries that share one created_at (as the revocations of one organization
   * deletion do), written as the runtime role in the tenant's transaction.
   */
  async function insertSameInstant(tenantId: string | null, count: number, at: Date): Promise<void> {
    await t.db.transaction().execute(async (trx) => {
      await sql`select set_config('app.tenant_id', ${tenantId ?? ''}, true)`.execute(trx);
      for (let i = 0; i < count; i += 1) {
        await trx
          .insertInto('audit_logs')
          .values({
            tenant_id: tenantId,
            actor_id: null,
            action: 'role.updated',
            metadata: sql`${JSON.stringify({ n: i })}::text::jsonb`,
            request_id: null,
            created_at: at,
          } as never)
          .execute();
      }
    });
  }

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
    member = await newMember(t, org, 'member');
    const role = await createRole(t, org.owner, {
      name: 'No Org Read',
      permissions: ['roles:read', 'api_keys:read', 'members:read'],
    });
    outsider = await newMember(t, org, role.slug);
    other = await createOrganization(t, await signedInUser(t));
    await makeEntries(org, 8, 4);
    await makeEntries(other, 3, 1);
    otherEntryIds = (await auditRows(t, other.id)).map((r) => r.id);
  });
  afterAll(() => t.close());

  it('requires organizations:read (403), a session (401) and an active organization (403)', async () => {
    const refused = await expectError(await get(outsider.jar), 403, 'INSUFFICIENT_PERMISSIONS');
    expect(refused.message).toBe('Insufficient permissions');
    await expectError(await get(undefined), 401, 'UNAUTHORIZED');
    const loner = await signedInUser(t);
    await expectError(await get(loner.jar), 403, 'NO_ACTIVE_ORGANIZATION');
    await getPage(member.jar);
  });

  it('answers { items: [{ id, action, actorId, organizationId, metadata, createdAt }], nextCursor }, newest first', async () => {
    const page = await getPage(member.jar, '?limit=100');
    expect(Object.keys(page).sort()).toEqual(['items', 'nextCursor']);
    expect(page.nextCursor).toBeNull();
    const stored = await auditRows(t, org.id); // oldest first
    expect(page.items.map((i) => i.id)).toEqual(stored.map((r) => r.id).reverse());
    expect(page.items.length).toBeGreaterThanOrEqual(12); // 8 created + 4 revoked (and role.created)
    for (const item of page.items) {
      expect(Object.keys(item).sort()).toEqual(ENTRY_FIELDS);
      expect(item.id).toMatch(UUID_V4);
      expect(item.organizationId).toBe(org.id);
      expect(item.createdAt).toMatch(ISO);
      expect(typeof item.metadata).toBe('object');
    }
    const times = page.items.map((i) => Date.parse(i.createdAt));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    // The newest entries are the last revocation's; the oldest is the first creation (or earlier).
    const keyEntries = page.items.filter((i) => i.action.startsWith('api_key.'));
    expect(keyEntries.filter((i) => i.action === 'api_key.created')).toHaveLength(8);
    expect(keyEntries.filter((i) => i.action === 'api_key.revoked')).toHaveLength(4);
    expect(keyEntries.every((i) => i.actorId === org.owner.id)).toBe(true);
    expect(keyEntries.at(-1)).toMatchObject({ action: 'api_key.created', metadata: { name: 'k0' } });
    expect(keyEntries[0]).toMatchObject({ action: 'api_key.created', metadata: { name: 'k7' } });
  });

  it('rejects a limit outside 1..100 or not an integer, and unknown query parameters (400)', async () => {
    for (const limit of ['0', '101', 'x', '-1', '1.5', '', '1e3', '100x']) {
      await expectError(await get(member.jar, `?limit=${limit}`), 400, 'VALIDATION_ERROR');
    }
    await expectError(await get(member.jar, '?page=2'), 400, 'VALIDATION_ERROR');
    expect((await getPage(member.jar, '?limit=1')).items).toHaveLength(1);
    expect((await getPage(member.jar, '?limit=100')).items.length).toBeGreaterThan(1);
  });

  it('rejects a garbage cursor (400)', async () => {
    const cursors = [
      'garbage',
      '!!!',
      b64({}),
      b64('not json'),
      b64({ createdAt: 'yesterday', id: crypto.randomUUID() }),
      b64({ createdAt: new Date().toISOString(), id: 'not-a-uuid' }),
      b64({ createdAt: new Date().toISOString(), id: crypto.randomUUID(), extra: 1 }),
      b64([new Date().toISOString(), crypto.randomUUID()]),
      'a'.repeat(513),
    ];
    for (const cursor of cursors) {
      await expectError(await get(member.jar, `?cursor=${encodeURIComponent(cursor)}`), 400, 'VALIDATION_ERROR');
    }
    await expectError(await get(member.jar, '?cursor='), 400, 'VALIDATION_ERROR');
  });

  it('rejects a cursor whose time is out of range or not a time (400, never 500)', async () => {
    const id = crypto.randomUUID();
    const times = [
      '0000-01-01T00:00:00Z', // no year 0 in PostgreSQL
      '+300000-01-01T00:00:00Z',
      '300000-01-01T00:00:00Z',
      '-000001-01-01T00:00:00Z',
      '-1',
      'NaN',
      '2024-02-30T00:00:00Z',
      '2024-01-01T24:00:00Z',
      '2024-01-01T00:00:60Z',
      `2024-01-01T00:00:00.${'9'.repeat(300)}Z`,
      '2024-01-01T00:00:00+25:00',
      '2024-01-01T00:00:00+05:99',
      '2024-01-01T00:00:00 Z',
      '9999-12-31T23:59:59.9999999Z', // rounds past year 9999
      '0001-01-01T00:00:00+01:00', // year 0 once in UTC
      '9999-12-31T23:00:00-05:00', // year 10000 once in UTC
    ];
    for (const createdAt of times) {
      const res = await get(member.jar, `?cursor=${encodeURIComponent(b64({ createdAt, id }))}`);
      expect(res.status, createdAt).toBe(400);
      expect(await res.json(), createdAt).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: [{ path: 'cursor', message: expect.any(String) }],
      });
    }
    for (const createdAt of [-1, 1e20, Number.NaN, null, 1700000000000]) {
      await expectError(
        await get(member.jar, `?cursor=${encodeURIComponent(b64({ createdAt, id }))}`),
        400,
        'VALIDATION_ERROR',
      );
    }
  });

  it('accepts a cursor at the edges of the range (year 1 and year 9999), with an offset', async () => {
    const id = crypto.randomUUID();
    expect(
      (
        await getPage(
          member.jar,
          `?cursor=${encodeURIComponent(b64({ createdAt: '0001-01-01T00:00:00.000000Z', id }))}`,
        )
      ).items,
    ).toEqual([]);
    const all = await getPage(
      member.jar,
      `?limit=100&cursor=${encodeURIComponent(b64({ createdAt: '9999-12-31T23:59:59.999999Z', id }))}`,
    );
    expect(all.items.length).toBeGreaterThan(0);
    const offset = await getPage(
      member.jar,
      `?limit=100&cursor=${encodeURIComponent(b64({ createdAt: '9999-12-31T10:00:00.5+05:30', id }))}`,
    );
    expect(offset.items.map((entry) => entry.id)).toEqual(all.items.map((entry) => entry.id));
  });

  it('pages with the cursor without overlap or gap, including entries that share one instant', async () => {
    const fresh = await createOrganization(t, await signedInUser(t));
    await makeEntries(fresh, 4, 2);
    // Seven entries at one instant in the middle of the log, and two older ones.
    const firstKeyEntry = (await auditRows(t, fresh.id, 'api_key.created'))[0]!;
    await insertSameInstant(fresh.id, 7, new Date(firstKeyEntry.created_at.getTime() - 1000));
    await insertSameInstant(fresh.id, 2, new Date(firstKeyEntry.created_at.getTime() - 60_000));
    const stored = await auditRows(t, fresh.id);
    // auditRows is (created_at, id) ascending, by the database's own microsecond clock.
    const expected = stored.map((r) => r.id).reverse();
    expect(expected.length).toBeGreaterThanOrEqual(15);

    const whole = await getPage(fresh.owner.jar, '?limit=100');
    expect(whole.items.map((i) => i.id)).toEqual(expected);

    for (const limit of [1, 2, 3, 7]) {
      const { pages, items } = await allPages(fresh.owner.jar, limit);
      expect(
        items.map((i) => i.id),
        `limit ${limit}`,
      ).toEqual(expected);
      expect(pages).toHaveLength(Math.ceil(expected.length / limit));
      for (const page of pages.slice(0, -1)) {
        expect(page.items).toHaveLength(limit);
        expect(page.nextCursor).toEqual(expect.any(String));
      }
      expect(pages.at(-1)!.nextCursor).toBeNull();
    }
    // An exact multiple of the limit ends without an empty page.
    const exact = await allPages(fresh.owner.jar, expected.length);
    expect(exact.pages).toHaveLength(1);
    expect(exact.pages[0]!.nextCursor).toBeNull();
  });

  it('pages without gap through entries one transaction wrote (same instant, to the microsecond)', async () => {
    // One organization deletion or account purge writes several entries in one
    // transaction: they share now(), which PostgreSQL keeps to the microsecond.
    const fresh = await createOrganization(t, await signedInUser(t));
    await makeEntries(fresh, 2, 0);
    await t.db.transaction().execute(async (trx) => {
      await sql`select set_config('app.tenant_id', ${fresh.id}, true)`.execute(trx);
      for (let i = 0; i < 6; i += 1) {
        await trx
          .insertInto('audit_logs')
          .values({
            tenant_id: fresh.id,
            actor_id: null,
            action: 'role.updated',
            metadata: sql`${JSON.stringify({ n: i })}::text::jsonb`,
            request_id: null,
          } as never)
          .execute();
      }
      // And an instant whose microseconds are certainly not zero.
      for (let i = 0; i < 4; i += 1) {
        await trx
          .insertInto('audit_logs')
          .values({
            tenant_id: fresh.id,
            actor_id: null,
            action: 'role.deleted',
            metadata: sql`${JSON.stringify({ n: i })}::text::jsonb`,
            request_id: null,
            created_at: sql`now() - interval '1 second' + interval '123 microseconds'`,
          } as never)
          .execute();
      }
    });
    const stored = await auditRows(t, fresh.id);
    const whole = (await getPage(fresh.owner.jar, '?limit=100')).items.map((i) => i.id);
    expect(whole).toHaveLength(stored.length);
    for (const limit of [1, 2, 4]) {
      const { items } = await allPages(fresh.owner.jar, limit);
      expect(
        items.map((i) => i.id),
        `limit ${limit}`,
      ).toEqual(whole);
    }
  });

  it('serves 50 by default', async () => {
    const busy = await createOrganization(t, await signedInUser(t));
    await insertSameInstant(busy.id, 60, new Date());
    const first = await getPage(busy.owner.jar);
    expect(first.items).toHaveLength(50);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await getPage(busy.owner.jar, `?cursor=${encodeURIComponent(first.nextCursor!)}`);
    expect(second.items).toHaveLength(10);
    expect(second.nextCursor).toBeNull();
    expect(new Set([...first.items, ...second.items].map((i) => i.id)).size).toBe(60);
  });

  it("never shows another organization's entries, nor platform-level ones, whatever the cursor", async () => {
    await insertSameInstant(null, 2, new Date());
    const { items } = await allPages(org.owner.jar, 5);
    expect(items.length).toBeGreaterThan(0);
    expect(items.every((i) => i.organizationId === org.id)).toBe(true);
    const ids = new Set(items.map((i) => i.id));
    for (const id of otherEntryIds) expect(ids.has(id)).toBe(false);
    expect(items.map((i) => i.id).sort()).toEqual((await auditRows(t, org.id)).map((r) => r.id).sort());

    // A cursor taken from the other organization's log is only a position.
    const otherPage = await getPage(other.owner.jar, '?limit=1');
    expect(otherPage.nextCursor).not.toBeNull();
    const crossed = await getPage(org.owner.jar, `?limit=100&cursor=${encodeURIComponent(otherPage.nextCursor!)}`);
    expect(crossed.items.every((i) => i.organizationId === org.id)).toBe(true);
    for (const item of crossed.items) expect(otherEntryIds).not.toContain(item.id);

    // And the other organization sees its own only.
    const theirs = await allPages(other.owner.jar, 100);
    expect(theirs.items.map((i) => i.id).sort()).toEqual([...otherEntryIds].sort());
  });
});
