/**
 * docs/api.md "Platform roles", the admin routes: GET /api/admin/users (admin or superadmin),
 * PATCH /api/admin/users/:id/role (superadmin), audited as `user.role_changed`.
 */
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call } from '../support/http.js';
import { type SignedInUser, signedInUser, uniqueEmail } from '../support/users.js';

interface AdminUser {
  id: string;
  email: string;
  role: string;
  emailVerified: boolean;
  deletedAt: string | null;
  createdAt: string;
}

interface AuditRow {
  id: string;
  tenant_id: string | null;
  actor_id: string | null;
  action: string;
  metadata: Record<string, unknown>;
  request_id: string | null;
}

class Rollback<T> extends Error {
  constructor(readonly value: T) {
    super('rollback');
  }
}

/**
 * Platform-level audit rows (tenant_id NULL), read as the schema owner.
 *
 * audit_logs has FORCE ROW LEVEL SECURITY and its SELECT policy is
 * `tenant_id = current tenant`, so a NULL-tenant row is visible to no role
 * that is subject to RLS, the owner included. PGlite's owner session is the
 * superuser (which bypasses RLS); on a PostgreSQL server the owner is not.
 * What works on both without touching the migrations: the owner lifts FORCE
 * inside a transaction that is always rolled back (an owner is exempt from
 * its table's policies unless FORCE is on), so nothing outlives the read.
 */
async function platformAuditRows(t: TestApp, where: (db: Kysely<any>) => Promise<AuditRow[]>): Promise<AuditRow[]> {
  try {
    await t.database.withOwner((owner) =>
      owner.transaction().execute(async (trx) => {
        await sql`alter table audit_logs no force row level security`.execute(trx);
        throw new Rollback(await where(trx));
      }),
    );
  } catch (error) {
    if (error instanceof Rollback) return error.value as AuditRow[];
    throw error;
  }
  throw new Error('unreachable');
}

function roleChangesOf(t: TestApp, userId: string) {
  return platformAuditRows(
    t,
    (db) =>
      db
        .selectFrom('audit_logs')
        .select(['id', 'tenant_id', 'actor_id', 'action', 'metadata', 'request_id'])
        .where('action', '=', 'user.role_changed')
        .where(sql`metadata->>'userId'`, '=', userId)
        .orderBy('created_at')
        .execute() as Promise<AuditRow[]>,
  );
}

async function setRole(t: TestApp, userId: string, role: 'superadmin' | 'admin' | 'user') {
  await t.database.withOwner((owner) => owner.updateTable('users').set({ role }).where('id', '=', userId).execute());
}

async function listUsers(t: TestApp, jar: SignedInUser['jar'], query = '') {
  const res = await call(t, `/api/admin/users${query}`, { jar });
  return {
    res,
    body: (await res.json()) as { items: AdminUser[]; nextCursor: string | null } & Record<string, unknown>,
  };
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('platform admin routes', () => {
  let t: TestApp;
  let plain: SignedInUser;
  let admin: SignedInUser;
  let superadmin: SignedInUser;

  beforeAll(async () => {
    t = await createTestApp();
    plain = await signedInUser(t);
    admin = await signedInUser(t);
    superadmin = await signedInUser(t);
    await setRole(t, admin.id, 'admin');
    await setRole(t, superadmin.id, 'superadmin');
  });
  afterAll(() => t.close());

  describe('GET /api/admin/users', () => {
    it('401 UNAUTHORIZED without a session', async () => {
      const res = await call(t, '/api/admin/users');
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ code: 'UNAUTHORIZED', message: expect.any(String) });
    });

    it('403 FORBIDDEN for a plain user', async () => {
      const res = await call(t, '/api/admin/users', { jar: plain.jar });
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual({ code: 'FORBIDDEN', message: expect.any(String) });
    });

    it('200 for admin and superadmin: { items: [{ id, email, role, emailVerified, deletedAt, createdAt }], nextCursor }, newest first', async () => {
      for (const caller of [admin, superadmin]) {
        const { res, body } = await listUsers(t, caller.jar);
        expect(res.status).toBe(200);
        expect(Object.keys(body).sort()).toEqual(['items', 'nextCursor']);
        expect(body.nextCursor).toBeNull();
        const me = body.items.find((item) => item.id === caller.id);
        expect(me).toStrictEqual({
          id: caller.id,
          email: caller.email,
          role: caller === admin ? 'admin' : 'superadmin',
          emailVerified: true,
          deletedAt: null,
          createdAt: expect.stringMatching(ISO),
        });
        for (const item of body.items)
          expect(Object.keys(item).sort()).toEqual(['createdAt', 'deletedAt', 'email', 'emailVerified', 'id', 'role']);
        const created = body.items.map((item) => item.createdAt);
        expect(created).toEqual([...created].sort().reverse());
        // Sign-up order: superadmin was created last, plain first.
        const ids = body.items.map((item) => item.id);
        expect(ids.indexOf(superadmin.id)).toBeLessThan(ids.indexOf(admin.id));
        expect(ids.indexOf(admin.id)).toBeLessThan(ids.indexOf(plain.id));
      }
    });

    it('shows deletedAt and unverified users as stored', async () => {
      const email = uniqueEmail('unverified');
      await call(t, '/api/auth/sign-up/email', {
        body: { email, password: 'correct horse battery staple', name: 'U' },
      });
      const deletedAt = new Date('2026-01-02T03:04:05.678Z');
      await t.database.withOwner((owner) =>
        owner.updateTable('users').set({ deleted_at: deletedAt }).where('email', '=', email).execute(),
      );
      const { body } = await listUsers(t, admin.jar);
      expect(body.items.find((item) => item.email === email)).toMatchObject({
        emailVerified: false,
        deletedAt: deletedAt.toISOString(),
        role: 'user',
      });
    });

    it('limit and cursor paginate without overlap or gaps, ties on createdAt broken by id', async () => {
      // Five users created in the same instant, and two more a moment apart.
      const sameInstant = new Date(Date.now() - 60_000);
      await t.database.withOwner(async (owner) => {
        for (let i = 0; i < 5; i++) {
          await owner
            .insertInto('users')
            .values({ name: `Tie ${i}`, email: uniqueEmail('tie'), created_at: sameInstant, updated_at: sameInstant })
            .execute();
        }
        for (let i = 0; i < 2; i++) {
          const at = new Date(sameInstant.getTime() - (i + 1) * 1000);
          await owner
            .insertInto('users')
            .values({ name: `Older ${i}`, email: uniqueEmail('older'), created_at: at, updated_at: at })
            .execute();
        }
      });

      const { body: all } = await listUsers(t, admin.jar, '?limit=100');
      expect(all.nextCursor).toBeNull();
      const total = await t.db.selectFrom('users').select(t.db.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      expect(all.items).toHaveLength(Number(total.n));
      expect(all.items.length).toBeGreaterThan(10);
      // newest first; equal instants by id, descending
      for (let i = 1; i < all.items.length; i++) {
        const [a, b] = [all.items[i - 1]!, all.items[i]!];
        expect(a.createdAt > b.createdAt || (a.createdAt === b.createdAt && a.id > b.id), `${i}`).toBe(true);
      }

      for (const limit of [1, 2, 3, 7]) {
        const seen: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const { res, body } = await listUsers(
            t,
            admin.jar,
            `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
          );
          expect(res.status).toBe(200);
          expect(body.items.length).toBeLessThanOrEqual(limit);
          seen.push(...body.items.map((item) => item.id));
          cursor = body.nextCursor;
          pages += 1;
          expect(pages).toBeLessThan(100);
        } while (cursor);
        expect(seen, `limit=${limit}`).toEqual(all.items.map((item) => item.id));
      }
    });

    it('default limit is 50', async () => {
      const { body } = await listUsers(t, admin.jar);
      const total = await t.db.selectFrom('users').select(t.db.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
      expect(body.items).toHaveLength(Math.min(50, Number(total.n)));
    });

    for (const query of [
      '?limit=0',
      '?limit=101',
      '?limit=-1',
      '?limit=abc',
      '?limit=1.5',
      '?cursor=garbage',
      `?cursor=${Buffer.from('{"createdAt":"x","id":"y"}').toString('base64url')}`,
      '?cursor=',
      '?unknown=1',
    ]) {
      it(`${query} → 400 VALIDATION_ERROR`, async () => {
        const res = await call(t, `/api/admin/users${query}`, { jar: admin.jar });
        expect(res.status).toBe(400);
        expect(await res.json()).toMatchObject({ code: 'VALIDATION_ERROR', message: expect.any(String) });
      });
    }

    it('a cursor whose time is out of range (year 0, 300000, negative, NaN, past 9999 in UTC) → 400 VALIDATION_ERROR, never 500', async () => {
      const id = crypto.randomUUID();
      const cursor = (createdAt: unknown) =>
        encodeURIComponent(Buffer.from(JSON.stringify({ createdAt, id })).toString('base64url'));
      for (const createdAt of [
        '0000-01-01T00:00:00Z',
        '+300000-01-01T00:00:00Z',
        '-000001-01-01T00:00:00Z',
        'NaN',
        -1,
        '9999-12-31T23:00:00-05:00',
        `2024-01-01T00:00:00.${'9'.repeat(20)}Z`,
      ]) {
        const res = await call(t, `/api/admin/users?cursor=${cursor(createdAt)}`, { jar: admin.jar });
        expect(res.status, String(createdAt)).toBe(400);
        expect(await res.json()).toMatchObject({
          code: 'VALIDATION_ERROR',
          details: [{ path: 'cursor', message: expect.any(String) }],
        });
      }
      const edge = await listUsers(t, admin.jar, `?limit=100&cursor=${cursor('9999-12-31T23:59:59.999999Z')}`);
      expect(edge.res.status).toBe(200);
      expect(edge.body.items.length).toBeGreaterThan(0);
    });

    it('validation comes after the guard: a bad query without a session is 401, not 400', async () => {
      expect((await call(t, '/api/admin/users?limit=0')).status).toBe(401);
      expect((await call(t, '/api/admin/users?limit=0', { jar: plain.jar })).status).toBe(403);
    });
  });

  describe('PATCH /api/admin/users/:id/role', () => {
    const patch = (jar: SignedInUser['jar'] | undefined, id: string, body: unknown, headers?: Record<string, string>) =>
      call(t, `/api/admin/users/${id}/role`, { method: 'PATCH', jar, body, headers });

    it('401 without a session, 403 FORBIDDEN for a plain user and for an admin (superadmin only)', async () => {
      const target = await signedInUser(t);
      expect((await patch(undefined, target.id, { role: 'admin' })).status).toBe(401);
      for (const caller of [plain, admin]) {
        const res = await patch(caller.jar, target.id, { role: 'admin' });
        expect(res.status).toBe(403);
        expect(await res.json()).toEqual({ code: 'FORBIDDEN', message: expect.any(String) });
      }
      const row = await t.db.selectFrom('users').select('role').where('id', '=', target.id).executeTakeFirstOrThrow();
      expect(row.role).toBe('user');
      expect(await roleChangesOf(t, target.id)).toEqual([]);
    });

    it('200 { id, role } for a superadmin, stored, and audited as user.role_changed', async () => {
      const target = await signedInUser(t);
      const res = await patch(superadmin.jar, target.id, { role: 'admin' });
      expect(res.status).toBe(200);
      expect(await res.json()).toStrictEqual({ id: target.id, role: 'admin' });
      const row = await t.db.selectFrom('users').select('role').where('id', '=', target.id).executeTakeFirstOrThrow();
      expect(row.role).toBe('admin');

      const rows = await roleChangesOf(t, target.id);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        tenant_id: null,
        actor_id: superadmin.id,
        action: 'user.role_changed',
        metadata: { userId: target.id, previousRole: 'user', role: 'admin' },
        request_id: res.headers.get('x-request-id'),
      });

      // Back to user: a second entry; the same role again: no change, no entry.
      expect((await patch(superadmin.jar, target.id, { role: 'user' })).status).toBe(200);
      const same = await patch(superadmin.jar, target.id, { role: 'user' });
      expect(same.status).toBe(200);
      expect(await same.json()).toStrictEqual({ id: target.id, role: 'user' });
      const after = await roleChangesOf(t, target.id);
      expect(after.map((entry) => entry.metadata)).toEqual([
        { userId: target.id, previousRole: 'user', role: 'admin' },
        { userId: target.id, previousRole: 'admin', role: 'user' },
      ]);
    });

    it('the audit entry is invisible to the runtime role (row-level security), but written', async () => {
      const visible = await t.db
        .selectFrom('audit_logs')
        .select('id')
        .where('action', '=', 'user.role_changed')
        .execute();
      expect(visible).toEqual([]);
    });

    it('400 VALIDATION_ERROR for a non-UUID id, a non-v4 UUID, role owner, a missing role, unknown body fields', async () => {
      const target = await signedInUser(t);
      const cases: [string, unknown][] = [
        ['not-a-uuid', { role: 'admin' }],
        ['00000000-0000-0000-0000-000000000000', { role: 'admin' }],
        ['6ba7b810-9dad-11d1-80b4-00c04fd430c8', { role: 'admin' }], // v1
        [target.id, { role: 'owner' }],
        [target.id, { role: 'ADMIN' }],
        [target.id, {}],
        [target.id, { role: 'admin', extra: true }],
        [target.id, { role: 'admin', id: crypto.randomUUID() }],
        [target.id, 'not json'],
        [target.id, []],
      ];
      for (const [id, body] of cases) {
        const res = await patch(superadmin.jar, id, body);
        expect(res.status, JSON.stringify([id, body])).toBe(400);
        expect(await res.json(), JSON.stringify([id, body])).toMatchObject({ code: 'VALIDATION_ERROR' });
      }
      const row = await t.db.selectFrom('users').select('role').where('id', '=', target.id).executeTakeFirstOrThrow();
      expect(row.role).toBe('user');
      expect(await roleChangesOf(t, target.id)).toEqual([]);
    });

    it('415 for a non-JSON body', async () => {
      const target = await signedInUser(t);
      const res = await patch(superadmin.jar, target.id, 'role=admin', {
        'content-type': 'application/x-www-form-urlencoded',
      });
      expect(res.status).toBe(415);
      expect(await res.json()).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
    });

    it('404 NOT_FOUND for an unknown user id', async () => {
      const id = crypto.randomUUID();
      const res = await patch(superadmin.jar, id, { role: 'admin' });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ code: 'NOT_FOUND', message: expect.any(String) });
      expect(await roleChangesOf(t, id)).toEqual([]);
    });

    it('a superadmin may demote themself; the next request runs with the new role', async () => {
      const self = await signedInUser(t);
      await setRole(t, self.id, 'superadmin');
      const res = await patch(self.jar, self.id, { role: 'admin' });
      expect(res.status).toBe(200);
      expect((await patch(self.jar, self.id, { role: 'superadmin' })).status).toBe(403);
      expect((await call(t, '/api/admin/users', { jar: self.jar })).status).toBe(200);
    });
  });
});

describe('the last superadmin', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  const patch = (jar: SignedInUser['jar'], id: string, role: string) =>
    call(t, `/api/admin/users/${id}/role`, { method: 'PATCH', jar, body: { role } });
  const superadminIds = async () =>
    (await t.db.selectFrom('users').select('id').where('role', '=', 'superadmin').execute())
      .map((row) => row.id)
      .sort();

  /** A database with exactly these superadmins (earlier cases' ones demoted by the owner). */
  async function onlySuperadmins(count: number): Promise<SignedInUser[]> {
    await t.database.withOwner((owner) =>
      owner.updateTable('users').set({ role: 'user' }).where('role', '=', 'superadmin').execute(),
    );
    const users: SignedInUser[] = [];
    for (let i = 0; i < count; i++) {
      const user = await signedInUser(t);
      await setRole(t, user.id, 'superadmin');
      users.push(user);
    }
    return users;
  }

  it('cannot demote themself: 409 OWNERSHIP_CONSTRAINT, role kept, nothing audited', async () => {
    const [only] = await onlySuperadmins(1);
    for (const role of ['admin', 'user']) {
      const res = await patch(only!.jar, only!.id, role);
      expect(res.status, role).toBe(409);
      expect(await res.json()).toEqual({ code: 'OWNERSHIP_CONSTRAINT', message: expect.any(String) });
    }
    expect(await superadminIds()).toEqual([only!.id]);
    expect(await roleChangesOf(t, only!.id)).toEqual([]);
    // Still a superadmin: the same role again is a no-op 200, and other users can be changed.
    expect((await patch(only!.jar, only!.id, 'superadmin')).status).toBe(200);
    const other = await signedInUser(t);
    expect((await patch(only!.jar, other.id, 'admin')).status).toBe(200);
  });

  it('with two, one may demote the other or themself; then the one left cannot', async () => {
    const [a, b] = await onlySuperadmins(2);
    expect((await patch(a!.jar, b!.id, 'admin')).status).toBe(200);
    expect(await superadminIds()).toEqual([a!.id]);
    const res = await patch(a!.jar, a!.id, 'user');
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: 'OWNERSHIP_CONSTRAINT' });

    const [c, d] = await onlySuperadmins(2);
    expect((await patch(c!.jar, c!.id, 'admin')).status).toBe(200);
    expect(await superadminIds()).toEqual([d!.id]);
    expect((await patch(d!.jar, d!.id, 'admin')).status).toBe(409);
    expect(await superadminIds()).toEqual([d!.id]);
  });

  it('two superadmins demoting each other at once: one succeeds, the other gets 409, one superadmin is left', async () => {
    for (let round = 0; round < 3; round++) {
      const [a, b] = await onlySuperadmins(2);
      const responses = await Promise.all([patch(a!.jar, b!.id, 'admin'), patch(b!.jar, a!.id, 'admin')]);
      // The loser is refused by the count (409), or by the guard (403) when the
      // winner's change was committed before the loser's session was read.
      const statuses = responses.map((res) => res.status).sort();
      expect(statuses[0]).toBe(200);
      expect([403, 409]).toContain(statuses[1]);
      const left = await superadminIds();
      expect(left).toHaveLength(1);
      // The one who succeeded is the one left.
      const winner = responses[0]!.status === 200 ? a! : b!;
      expect(left).toEqual([winner.id]);
    }
  });

  it('two superadmins demoting themselves at once: one succeeds, the other gets 409', async () => {
    const [a, b] = await onlySuperadmins(2);
    const responses = await Promise.all([patch(a!.jar, a!.id, 'user'), patch(b!.jar, b!.id, 'user')]);
    const statuses = responses.map((res) => res.status).sort();
    expect(statuses[0]).toBe(200);
    expect([403, 409]).toContain(statuses[1]);
    expect(await superadminIds()).toHaveLength(1);
  });
});
