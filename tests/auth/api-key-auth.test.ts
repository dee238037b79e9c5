import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { hashKey } from '../../src/auth/api-key-material.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { openPglite, type PgliteDatabase } from '../../src/db/open.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { type CookieJar, call, type ErrorBody, expectError, expectStatus, mailsTo } from '../support/http.js';
import {
  asOwnerInTenant,
  auditRows,
  createOrganization,
  createRole,
  newMember,
  type RoleRecord,
  roleBySlug,
  setActive,
  storedRoles,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * API_KEY_AUTH=enabled: `Authorization: Bearer sk_live_…`
 * authenticates permission-guarded tenant routes when the switch is on, as
 * the key's organization, with its scopes narrowed to the creator's current
 * permissions there; never on the library's, account, platform or
 * key-minting routes; its own rate tier; lastUsedAt at most once a minute;
 * audited actions name the key.
 */

interface CreatedKey {
  id: string;
  key: string;
  scopes: string[];
  expiresAt: string | null;
}
interface ListedKey {
  id: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
/** A well-formed key nobody issued (the right prefix, length and alphabet). */
const unknownKey = () => `sk_live_${crypto.randomUUID().replaceAll('-', '').slice(0, 32).replace(/[0-9]/g, 'Z')}`;

describe('API keys that authenticate (API_KEY_AUTH)', () => {
  /** API_KEY_AUTH=enabled. */
  let t: TestApp;
  /** The same database with the switch at its default (disabled). */
  let off: TestApp;
  let org: TestOrganization;
  /** A second organization of the same Owner (to switch the session away from `org`). */
  let elsewhere: TestOrganization;
  let orgMarker: RoleRecord;
  let elsewhereMarker: RoleRecord;

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    off = await createTestApp({ database: t.database, clock: t.clock });
    const owner = await signedInUser(t, { name: 'Olive Owner' });
    org = await createOrganization(t, owner);
    orgMarker = await createRole(t, owner, { name: 'Marker Of Org', permissions: ['roles:read'] });
    elsewhere = await createOrganization(t, owner);
    elsewhereMarker = await createRole(t, owner, { name: 'Marker Of Elsewhere', permissions: ['roles:read'] });
    await setActive(t, owner, org.id);
  });
  afterAll(async () => {
    await off?.close();
    await t?.close();
  });

  async function createKey(jar: CookieJar, scopes: string[], extra: Record<string, unknown> = {}): Promise<CreatedKey> {
    return expectStatus<CreatedKey>(
      await call(t, '/api/api-keys', {
        body: { name: `key ${crypto.randomUUID().slice(0, 6)}`, scopes, ...extra },
        jar,
      }),
      201,
    );
  }

  const withKey = (
    app: Pick<TestApp, 'app'>,
    key: string,
    path: string,
    options: { method?: string; body?: unknown; jar?: CookieJar } = {},
  ) => call(app, path, { ...options, headers: bearer(key) });

  async function listedKey(jar: CookieJar, id: string): Promise<ListedKey> {
    const found = (await expectStatus<ListedKey[]>(await call(t, '/api/api-keys', { jar }), 200)).find(
      (k) => k.id === id,
    );
    if (!found) throw new Error(`key ${id} is not listed`);
    return found;
  }

  async function changeRole(memberId: string, roleId: string): Promise<void> {
    await expectStatus(
      await call(t, `/api/admin/members/${memberId}`, { method: 'PATCH', body: { roleId }, jar: org.owner.jar }),
      200,
    );
  }

  describe('the switch', () => {
    it('off (the default): a valid key authenticates nothing, 401', async () => {
      expect(off.config.apiKeyAuth).toBe(false);
      const created = await createKey(org.owner.jar, ['roles:read']);
      await expectError(await withKey(off, created.key, '/api/roles'), 401, 'UNAUTHORIZED');
      // The same key on the same database, switch on: it works, so the 401 above is the switch.
      expect(t.config.apiKeyAuth).toBe(true);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      await expectError(await withKey(off, created.key, '/api/roles'), 401, 'UNAUTHORIZED');
    });
  });

  describe('what a key reads', () => {
    it("reads what its scopes allow, in the key's organization, and nothing more", async () => {
      const created = await createKey(org.owner.jar, ['roles:read']);
      const roles = await expectStatus<RoleRecord[]>(await withKey(t, created.key, '/api/roles'), 200);
      const stored = await storedRoles(t, org.id);
      expect(roles.map((r) => r.id).sort()).toEqual(stored.map((r) => r.id).sort());
      expect(roles.map((r) => r.slug)).toContain(orgMarker.slug);

      // The Owner holds every permission; the key only roles:read.
      await expectError(await withKey(t, created.key, '/api/members'), 403, 'INSUFFICIENT_PERMISSIONS');
      await expectError(await withKey(t, created.key, '/api/api-keys'), 403, 'INSUFFICIENT_PERMISSIONS');
      await expectError(await withKey(t, created.key, '/api/audit-logs'), 403, 'INSUFFICIENT_PERMISSIONS');
      await expectError(
        await withKey(t, created.key, '/api/roles', { body: { name: 'Minted By Key', permissions: ['roles:read'] } }),
        403,
        'INSUFFICIENT_PERMISSIONS',
      );
      expect((await storedRoles(t, org.id)).map((r) => r.name)).not.toContain('Minted By Key');
    });

    it("acts in the key's organization even after the creator's session switched to another", async () => {
      const created = await createKey(org.owner.jar, ['roles:read', 'members:read']);
      await setActive(t, org.owner, elsewhere.id);
      try {
        // The creator's session now reads the other organization…
        const mine = await expectStatus<RoleRecord[]>(await call(t, '/api/roles', { jar: org.owner.jar }), 200);
        expect(mine.map((r) => r.slug)).toContain(elsewhereMarker.slug);
        // …the key still reads its own.
        const viaKey = await expectStatus<RoleRecord[]>(await withKey(t, created.key, '/api/roles'), 200);
        expect(viaKey.map((r) => r.slug)).toContain(orgMarker.slug);
        expect(viaKey.map((r) => r.slug)).not.toContain(elsewhereMarker.slug);
        expect(viaKey.map((r) => r.id).sort()).toEqual((await storedRoles(t, org.id)).map((r) => r.id).sort());
        const members = await expectStatus<{ userId: string }[]>(await withKey(t, created.key, '/api/members'), 200);
        expect(members.map((m) => m.userId)).toContain(org.owner.id);
      } finally {
        await setActive(t, org.owner, org.id);
      }
    });
  });

  describe("the creator's current permissions bound the key", () => {
    it('a demoted creator loses the scope on the very next request; restoring the role restores it', async () => {
      const creator = await newMember(t, org, 'admin');
      const created = await createKey(creator.jar, ['roles:read', 'members:read']);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      await expectStatus(await withKey(t, created.key, '/api/members'), 200);

      const narrow = await createRole(t, org.owner, {
        name: `Members Only ${crypto.randomUUID().slice(0, 6)}`,
        permissions: ['members:read'],
      });
      await changeRole(creator.memberId, narrow.id);
      await expectError(await withKey(t, created.key, '/api/roles'), 403, 'INSUFFICIENT_PERMISSIONS');
      // Narrowed, not ended: the scope the creator still holds works.
      await expectStatus(await withKey(t, created.key, '/api/members'), 200);

      await changeRole(creator.memberId, (await roleBySlug(t, org.owner, 'admin')).id);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
    });

    it('a creator removed from the organization ends the key: 401', async () => {
      const creator = await newMember(t, org, 'admin');
      const created = await createKey(creator.jar, ['roles:read']);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      await expectStatus(
        await call(t, '/api/auth/organization/remove-member', {
          body: { memberIdOrEmail: creator.memberId, organizationId: org.id },
          jar: org.owner.jar,
        }),
        200,
      );
      await expectError(await withKey(t, created.key, '/api/roles'), 401, 'UNAUTHORIZED');
    });

    it('a creator whose account is scheduled for deletion ends the key: 401', async () => {
      const creator = await newMember(t, org, 'admin');
      const created = await createKey(creator.jar, ['roles:read']);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      await expectStatus(await call(t, '/api/users/me/deletion', { method: 'POST', jar: creator.jar }), 202);
      await expectError(await withKey(t, created.key, '/api/roles'), 401, 'UNAUTHORIZED');
    });

    it('the superadmin bypass never applies to a key', async () => {
      const creator = await newMember(t, org, 'admin');
      const withoutScope = await createKey(creator.jar, ['roles:read']);
      const withScope = await createKey(creator.jar, ['roles:read', 'members:read']);
      // The creator loses members:read, then becomes superadmin.
      const rolesOnly = await createRole(t, org.owner, {
        name: `Roles Only ${crypto.randomUUID().slice(0, 6)}`,
        permissions: ['roles:read'],
      });
      await changeRole(creator.memberId, rolesOnly.id);
      await t.database.withOwner((owner) =>
        owner.updateTable('users').set({ role: 'superadmin' }).where('id', '=', creator.id).execute(),
      );

      // The creator's session passes by the bypass…
      await expectStatus(await call(t, '/api/members', { jar: creator.jar }), 200);
      await expectStatus(await call(t, '/api/admin/users', { jar: creator.jar }), 200);
      // …its keys do not: not without the scope, not with a scope the creator no longer holds, not on platform routes.
      await expectError(await withKey(t, withoutScope.key, '/api/members'), 403, 'INSUFFICIENT_PERMISSIONS');
      await expectError(await withKey(t, withScope.key, '/api/members'), 403, 'INSUFFICIENT_PERMISSIONS');
      await expectError(await withKey(t, withScope.key, '/api/admin/users'), 401, 'UNAUTHORIZED');
      await expectStatus(await withKey(t, withScope.key, '/api/roles'), 200);
    });

    it("a superadmin creator's key grants nothing beyond its scopes: no role with more, no member raised to Owner", async () => {
      const creator = await newMember(t, org, 'admin');
      const roleWriter = await createKey(creator.jar, ['roles:read', 'roles:write']);
      const memberWriter = await createKey(creator.jar, ['members:read', 'members:write']);
      await t.database.withOwner((owner) =>
        owner.updateTable('users').set({ role: 'superadmin' }).where('id', '=', creator.id).execute(),
      );
      const name = `Escalated ${crypto.randomUUID().slice(0, 6)}`;

      await expectError(
        await withKey(t, roleWriter.key, '/api/roles', { body: { name, permissions: ['organizations:delete'] } }),
        403,
        'INSUFFICIENT_PERMISSIONS',
      );
      expect((await storedRoles(t, org.id)).map((r) => r.name)).not.toContain(name);
      // Within its scopes it still works.
      await expectStatus(
        await withKey(t, roleWriter.key, '/api/roles', { body: { name, permissions: ['roles:read'] } }),
        201,
      );

      const target = await newMember(t, org, 'viewer');
      const ownerRole = await roleBySlug(t, org.owner, 'owner');
      await expectError(
        await withKey(t, memberWriter.key, `/api/admin/members/${target.memberId}`, {
          method: 'PATCH',
          body: { roleId: ownerRole.id },
        }),
        403,
        'INSUFFICIENT_PERMISSIONS',
      );
      const members = await expectStatus<{ id: string; roleSlug: string | null }[]>(
        await call(t, '/api/members', { jar: org.owner.jar }),
        200,
      );
      expect(members.find((m) => m.id === target.memberId)?.roleSlug).toBe('viewer');

      // The creator's own session keeps the superadmin's powers (the bypass is the session's, not the key's).
      await expectStatus(
        await call(t, '/api/roles', {
          body: { name: `${name} by session`, permissions: ['organizations:delete'] },
          jar: creator.jar,
        }),
        201,
      );
    });
  });

  describe('keys that no longer work', () => {
    it('a revoked key: 401 on the next request', async () => {
      const created = await createKey(org.owner.jar, ['roles:read']);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      await expectStatus(await call(t, `/api/api-keys/${created.id}`, { method: 'DELETE', jar: org.owner.jar }), 200);
      await expectError(await withKey(t, created.key, '/api/roles'), 401, 'UNAUTHORIZED');
    });

    it('an expired key: 401 once the clock passes expiresAt', async () => {
      const expiresAt = new Date(t.clock().getTime() + 5 * 60_000).toISOString();
      const created = await createKey(org.owner.jar, ['roles:read'], { expiresAt });
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      t.clock.advance(4 * 60_000);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      t.clock.advance(2 * 60_000);
      await expectError(await withKey(t, created.key, '/api/roles'), 401, 'UNAUTHORIZED');
    });

    it('the digest finds the row but the salted hash decides: a row whose key_hash does not match refuses the key, 401', async () => {
      const created = await createKey(org.owner.jar, ['roles:read']);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      const otherSalt = 'f'.repeat(32);
      await asOwnerInTenant(t, org.id, (trx) =>
        trx
          .updateTable('api_keys')
          .set({ key_hash: hashKey(created.key, otherSalt) })
          .where('id', '=', created.id)
          .execute(),
      );
      await expectError(await withKey(t, created.key, '/api/roles'), 401, 'UNAUTHORIZED');
    });

    it('a key with one character changed: 401', async () => {
      const created = await createKey(org.owner.jar, ['roles:read']);
      const last = created.key.at(-1) === 'A' ? 'B' : 'A';
      await expectError(await withKey(t, `${created.key.slice(0, -1)}${last}`, '/api/roles'), 401, 'UNAUTHORIZED');
      await expectError(await withKey(t, unknownKey(), '/api/roles'), 401, 'UNAUTHORIZED');
    });
  });

  describe('database statements, counted', () => {
    let counted: PgliteDatabase;
    let ct: TestApp;
    let statements = 0;
    const lastUsedWrites: string[] = [];

    beforeAll(async () => {
      const snapshot = inject('pgliteSnapshot');
      counted = await openPglite({
        url: 'pglite://memory',
        loadDataDir: snapshot ? new Blob([await readFile(snapshot)]) : undefined,
        log: (event) => {
          statements += 1;
          if (/^update "api_keys" set "last_used_at"/i.test(event.query.sql)) lastUsedWrites.push(event.query.sql);
        },
      });
      await migrateToLatest(counted);
      ct = await createTestApp({ database: { ...counted, engine: 'pglite' }, env: { API_KEY_AUTH: 'enabled' } });
    });
    afterAll(async () => {
      await ct?.close();
      await counted?.close();
    });

    async function statementsFor(authorization: string): Promise<{ status: number; code: string; statements: number }> {
      const before = statements;
      const response = await call(ct, '/api/roles', { headers: { authorization } });
      const body = (await response.json()) as ErrorBody;
      return { status: response.status, code: body.code, statements: statements - before };
    }

    it('the counter sees statements: a well-formed unknown key costs exactly one (the lookup by digest)', async () => {
      expect(await statementsFor(`Bearer ${unknownKey()}`)).toEqual({
        status: 401,
        code: 'UNAUTHORIZED',
        statements: 1,
      });
    });

    const good = 'Ab3'.repeat(11).slice(0, 32);
    it.each([
      ['too short', `sk_live_${good.slice(0, 31)}`],
      ['too long', `sk_live_${good}x`],
      ['nothing after the prefix', 'sk_live_'],
      ['another prefix', `sk_test_${good}`],
      ['the prefix in capitals', `SK_LIVE_${good}`],
      ['a character outside base 62', `sk_live_${good.slice(0, 31)}-`],
      ['an underscore inside', `sk_live_${good.slice(0, 16)}_${good.slice(17)}`],
      ['non-ASCII', `sk_live_${good.slice(0, 31)}é`],
    ])('%s: 401 without a statement', async (_label, key) => {
      expect(await statementsFor(`Bearer ${key}`)).toEqual({ status: 401, code: 'UNAUTHORIZED', statements: 0 });
    });

    it('lastUsedAt costs one write a minute, not one per request', async () => {
      const owner = await signedInUser(ct);
      await createOrganization(ct, owner);
      const created = await expectStatus<CreatedKey>(
        await call(ct, '/api/api-keys', { body: { name: 'counted', scopes: ['roles:read'] }, jar: owner.jar }),
        201,
      );
      // PGlite has one connection and its pool queues in order: once a later
      // request has read the database, a write started before it has run.
      const settle = async () => expectStatus(await call(ct, '/api/roles', { jar: owner.jar }), 200);
      const use = async () => expectStatus(await call(ct, '/api/roles', { headers: bearer(created.key) }), 200);

      await settle();
      expect(lastUsedWrites).toHaveLength(0);
      await use();
      await settle();
      expect(lastUsedWrites).toHaveLength(1);
      for (let i = 0; i < 5; i += 1) await use();
      ct.clock.advance(59_000);
      await use();
      await settle();
      expect(lastUsedWrites).toHaveLength(1);
      ct.clock.advance(2_000);
      await use();
      await use();
      await settle();
      expect(lastUsedWrites).toHaveLength(2);
    });
  });

  it('a key and a session cookie on one request: 400 VALIDATION_ERROR', async () => {
    const created = await createKey(org.owner.jar, ['roles:read']);
    await expectError(await withKey(t, created.key, '/api/roles', { jar: org.owner.jar }), 400, 'VALIDATION_ERROR');
    // Each alone works.
    await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
    await expectStatus(await call(t, '/api/roles', { jar: org.owner.jar }), 200);
  });

  describe('routes that refuse keys', () => {
    let created: CreatedKey;
    beforeAll(async () => {
      // Every scope the Owner holds: the refusals below are the routes', not the scopes'.
      const perms = (
        await expectStatus<{ permissions: string[] }>(await call(t, '/api/session', { jar: org.owner.jar }), 200)
      ).permissions;
      created = await createKey(org.owner.jar, perms);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
    });

    it("the library's /api/auth/get-session does not see the key's creator", async () => {
      // The library ignores Bearer keys: no session, its own answer (200 null).
      const response = await withKey(t, created.key, '/api/auth/get-session');
      expect(await expectStatus(response, 200)).toBeNull();
      // The creator's cookie does see it (the route answers a session when there is one).
      expect(await (await call(t, '/api/auth/get-session', { jar: org.owner.jar })).text()).toContain(org.owner.id);
    });

    it("the library's /api/auth/organization/list does not authenticate the key", async () => {
      const response = await withKey(t, created.key, '/api/auth/organization/list');
      const text = await response.text();
      expect(response.status, text).toBe(401);
      expect(text).not.toContain(org.id);
      expect(await (await call(t, '/api/auth/organization/list', { jar: org.owner.jar })).text()).toContain(org.id);
    });

    it("the library's gated organization routes never resolve the key: invite-member is 401 (not 403 for a missing scope), nothing is sent", async () => {
      const narrow = await createKey(org.owner.jar, ['roles:read']);
      const invitee = `invitee-${crypto.randomUUID().slice(0, 8)}@example.test`;
      for (const key of [narrow.key, created.key]) {
        const response = await withKey(t, key, '/api/auth/organization/invite-member', {
          body: { email: invitee, role: 'member', organizationId: org.id },
        });
        expect(response.status, await response.clone().text()).toBe(401);
      }
      expect(mailsTo(t, invitee)).toEqual([]);
      // The key was never resolved, so never marked used.
      expect((await listedKey(org.owner.jar, narrow.id)).lastUsedAt).toBeNull();
    });

    it.each([
      ['GET', '/api/users/me'],
      ['GET', '/api/users/me/export'],
      ['GET', '/api/admin/users'],
      ['POST', '/api/users/me/deletion'],
    ])('%s %s: 401', async (method, path) => {
      await expectError(await withKey(t, created.key, path, { method }), 401, 'UNAUTHORIZED');
    });

    it('the account was not scheduled for deletion by the refused key', async () => {
      const me = await expectStatus<{ deletedAt: string | null }>(
        await call(t, '/api/users/me', { jar: org.owner.jar }),
        200,
      );
      expect(me.deletedAt).toBeNull();
    });

    it('no key mints keys: POST /api/api-keys with api_keys:write is 403 FORBIDDEN, and nothing is created', async () => {
      expect(created.scopes).toContain('api_keys:write');
      const before = await expectStatus<ListedKey[]>(await call(t, '/api/api-keys', { jar: org.owner.jar }), 200);
      await expectError(
        await withKey(t, created.key, '/api/api-keys', { body: { name: 'minted', scopes: ['roles:read'] } }),
        403,
        'FORBIDDEN',
      );
      const after = await expectStatus<ListedKey[]>(await call(t, '/api/api-keys', { jar: org.owner.jar }), 200);
      expect(after.map((k) => k.id).sort()).toEqual(before.map((k) => k.id).sort());
      // Listing with the key is a permission route it may read.
      await expectStatus(await withKey(t, created.key, '/api/api-keys'), 200);
    });

    it('GET /api/session answers null for a key', async () => {
      expect(await expectStatus(await withKey(t, created.key, '/api/session'), 200)).toBeNull();
      expect(
        await expectStatus<{ user: { id: string } }>(await call(t, '/api/session', { jar: org.owner.jar }), 200),
      ).toMatchObject({ user: { id: org.owner.id } });
    });
  });

  describe('the API rate tier', () => {
    let limited: TestApp;
    beforeAll(async () => {
      limited = await createTestApp({
        database: t.database,
        clock: t.clock,
        env: {
          API_KEY_AUTH: 'enabled',
          RATE_LIMIT_ENABLED: 'true',
          RATE_LIMIT_API_LIMIT: '3',
          RATE_LIMIT_API_TTL: '3600',
          RATE_LIMIT_GLOBAL_LIMIT: '10000',
          RATE_LIMIT_GLOBAL_TTL: '60',
        },
      });
    });
    afterAll(() => limited?.close());

    it('the fourth request of a key is 429 with the headers; another key has its own budget', async () => {
      const first = await createKey(org.owner.jar, ['roles:read']);
      const second = await createKey(org.owner.jar, ['roles:read']);
      for (let i = 0; i < 3; i += 1) await expectStatus(await withKey(limited, first.key, '/api/roles'), 200);

      const now = limited.clock().getTime();
      const refused = await withKey(limited, first.key, '/api/roles');
      await expectError(refused.clone(), 429, 'RATE_LIMITED');
      expect(refused.headers.get('x-ratelimit-limit')).toBe('3');
      expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');
      const reset = Number(refused.headers.get('x-ratelimit-reset'));
      expect(reset).toBeGreaterThan(now / 1000);
      expect(reset).toBeLessThanOrEqual(Math.ceil(now / 1000) + 3600);
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(3600);
      await expectError(await withKey(limited, first.key, '/api/members'), 429, 'RATE_LIMITED');

      for (let i = 0; i < 3; i += 1) await expectStatus(await withKey(limited, second.key, '/api/roles'), 200);
      await expectError(await withKey(limited, second.key, '/api/roles'), 429, 'RATE_LIMITED');
    });
  });

  describe('lastUsedAt', () => {
    /** Reads the listing until lastUsedAt is `expected` (the write does not hold up the response); bounded by count. */
    async function lastUsedBecomes(id: string, expected: string): Promise<void> {
      let seen: string | null = null;
      for (let attempt = 0; attempt < 50; attempt += 1) {
        seen = (await listedKey(org.owner.jar, id)).lastUsedAt;
        if (seen === expected) return;
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(seen).toBe(expected);
    }

    it('is null before use, set on first use, unchanged within the minute, moved after it', async () => {
      const created = await createKey(org.owner.jar, ['roles:read']);
      expect((await listedKey(org.owner.jar, created.id)).lastUsedAt).toBeNull();

      const firstUse = t.clock().toISOString();
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      await lastUsedBecomes(created.id, firstUse);

      // 30 s later, same minute: no write (it would record the new time).
      t.clock.advance(30_000);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      for (let read = 0; read < 5; read += 1)
        expect((await listedKey(org.owner.jar, created.id)).lastUsedAt).toBe(firstUse);

      // Over a minute after the recorded use: it moves to this use.
      t.clock.advance(31_000);
      const laterUse = t.clock().toISOString();
      await expectStatus(await withKey(t, created.key, '/api/roles'), 200);
      await lastUsedBecomes(created.id, laterUse);
    });
  });

  describe('audit', () => {
    it("an action done with a key names the key as the actor's means", async () => {
      const acting = await createKey(org.owner.jar, ['api_keys:write']);
      const target = await createKey(org.owner.jar, ['roles:read']);
      const byCookie = await createKey(org.owner.jar, ['roles:read']);

      await expectStatus(await withKey(t, acting.key, `/api/api-keys/${target.id}`, { method: 'DELETE' }), 200);
      await expectError(await withKey(t, target.key, '/api/roles'), 401, 'UNAUTHORIZED');
      // The same action by cookie, right after in the same process: no means recorded.
      await expectStatus(await call(t, `/api/api-keys/${byCookie.id}`, { method: 'DELETE', jar: org.owner.jar }), 200);

      const revoked = await auditRows(t, org.id, 'api_key.revoked');
      const viaKey = revoked.filter((row) => row.metadata.keyId === target.id);
      expect(viaKey).toHaveLength(1);
      expect(viaKey[0]!.actor_id).toBe(org.owner.id);
      expect(viaKey[0]!.metadata.via).toEqual({ type: 'api_key', apiKeyId: acting.id });

      const viaCookie = revoked.filter((row) => row.metadata.keyId === byCookie.id);
      expect(viaCookie).toHaveLength(1);
      expect(viaCookie[0]!.actor_id).toBe(org.owner.id);
      expect(viaCookie[0]!.metadata).not.toHaveProperty('via');
    });
  });
});
