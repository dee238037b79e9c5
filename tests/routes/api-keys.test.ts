import { createHash, createHmac } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { type CookieJar, call, expectError, expectStatus, UUID_V4 } from '../support/http.js';
import {
  addMember,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  createRole,
  newMember,
  setActive,
  type TestMember,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * docs/api.md "API keys", "Audit actions" and "Access": the routes, their
 * errors and audit entries.
 */

const KEY = /^sk_live_[0-9A-Za-z]{32}$/;
const ANY_KEY = /sk_live_[0-9A-Za-z]{32}/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
// Oracle: copied from the contract on purpose; the service must agree with it.
const CREATED_FIELDS = ['createdAt', 'createdBy', 'expiresAt', 'id', 'key', 'keyPrefix', 'lastFour', 'name', 'scopes'];
const LISTED_FIELDS = [
  'createdAt',
  'createdBy',
  'expiresAt',
  'id',
  'keyPrefix',
  'lastFour',
  'lastUsedAt',
  'name',
  'revokedAt',
  'scopes',
];

interface CreatedKey {
  id: string;
  name: string;
  scopes: string[];
  expiresAt: string | null;
  keyPrefix: string;
  lastFour: string;
  createdAt: string;
  createdBy: string;
  key: string;
}
type ListedKey = Omit<CreatedKey, 'key'> & { revokedAt: string | null; lastUsedAt: string | null };

interface StoredKey {
  id: string;
  tenant_id: string;
  created_by: string;
  name: string;
  scopes: string[];
  expires_at: Date | null;
  key_prefix: string;
  last_four: string;
  key_hash: string;
  key_salt: string;
  lookup_digest: string;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

describe('API keys', () => {
  let t: TestApp;
  let org: TestOrganization;
  let admin: TestMember;
  let member: TestMember;
  /** A custom role holding api_keys:write and roles:read only. */
  let keymaker: TestMember;
  let other: TestOrganization;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t, { name: 'Olive Owner' }));
    admin = await newMember(t, org, 'admin');
    member = await newMember(t, org, 'member');
    const role = await createRole(t, org.owner, { name: 'Key Maker', permissions: ['api_keys:write', 'roles:read'] });
    keymaker = await newMember(t, org, role.slug);
    other = await createOrganization(t, await signedInUser(t, { name: 'Otto Other' }));
  });
  afterAll(() => t.close());

  const create = (jar: CookieJar, body: unknown) => call(t, '/api/api-keys', { body, jar });
  const list = (jar: CookieJar) => call(t, '/api/api-keys', { jar });
  const revoke = (jar: CookieJar, id: string) => call(t, `/api/api-keys/${id}`, { method: 'DELETE', jar });

  async function createOk(jar: CookieJar, body: Record<string, unknown> = {}): Promise<CreatedKey> {
    return expectStatus<CreatedKey>(
      await create(jar, { name: `key ${crypto.randomUUID().slice(0, 6)}`, scopes: ['roles:read'], ...body }),
      201,
    );
  }

  function storedKeys(tenantId: string): Promise<StoredKey[]> {
    return asOwnerInTenant(
      t,
      tenantId,
      (trx) =>
        trx
          .selectFrom('api_keys')
          .selectAll()
          .where('tenant_id', '=', tenantId)
          .orderBy('created_at')
          .execute() as Promise<StoredKey[]>,
    );
  }

  async function storedKey(tenantId: string, id: string): Promise<StoredKey> {
    const row = (await storedKeys(tenantId)).find((k) => k.id === id);
    if (!row) throw new Error(`no stored key ${id}`);
    return row;
  }

  async function listed(jar: CookieJar): Promise<ListedKey[]> {
    return expectStatus<ListedKey[]>(await list(jar), 200);
  }

  describe('creation', () => {
    it('answers 201 with exactly the contract fields: a sk_live_ key shown once, its last four, the prefix', async () => {
      const response = await create(org.owner.jar, { name: 'Deploy bot', scopes: ['roles:read', 'members:read'] });
      const body = await expectStatus<CreatedKey>(response, 201);
      expect(Object.keys(body).sort()).toEqual(CREATED_FIELDS);
      expect(body.key).toMatch(KEY);
      expect(body.lastFour).toBe(body.key.slice(-4));
      expect(body.keyPrefix).toBe('sk_live_');
      expect(body.id).toMatch(UUID_V4);
      expect(body.name).toBe('Deploy bot');
      expect([...body.scopes].sort()).toEqual(['members:read', 'roles:read']);
      expect(body.expiresAt).toBeNull();
      expect(body.createdBy).toBe(org.owner.id);
      expect(body.createdAt).toMatch(ISO);

      const stored = await storedKey(org.id, body.id);
      expect(stored).toMatchObject({
        tenant_id: org.id,
        created_by: org.owner.id,
        name: 'Deploy bot',
        key_prefix: 'sk_live_',
        last_four: body.lastFour,
        revoked_at: null,
        last_used_at: null,
      });
      expect(new Date(stored.created_at).toISOString()).toBe(body.createdAt);
    });

    it('gives every key its own random part', async () => {
      const keys = await Promise.all(Array.from({ length: 5 }, () => createOk(org.owner.jar)));
      expect(new Set(keys.map((k) => k.key)).size).toBe(5);
      expect(new Set(keys.map((k) => k.id)).size).toBe(5);
    });

    it('stores neither the key nor anything checkable without the salt: key_hash is HMAC-SHA256(key, key_salt)', async () => {
      const first = await createOk(org.owner.jar);
      const second = await createOk(org.owner.jar);
      for (const created of [first, second]) {
        const row = await storedKey(org.id, created.id);
        // No column holds the key, or its random part, in any form the row renders to.
        const { rows } = await asOwnerInTenant(t, org.id, (trx) =>
          sql<{ text: string }>`select k::text as text from api_keys k where k.id = ${created.id}`.execute(trx),
        );
        expect(rows).toHaveLength(1);
        const rendered = [rows[0]!.text, JSON.stringify(row), ...Object.values(row).map((v) => String(v))];
        for (const text of rendered) {
          expect(text).not.toContain(created.key);
          expect(text).not.toContain(created.key.slice('sk_live_'.length));
        }
        expect(row.key_salt).toMatch(/^[0-9a-f]{32}$/);
        expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
        expect(row.key_hash).toBe(createHmac('sha256', row.key_salt).update(created.key).digest('hex'));
        expect(row.key_hash).not.toBe(sha256(created.key));
        // The documented lookup index (migration 0004): SHA-256 of the key, one row per digest.
        expect(row.lookup_digest).toBe(sha256(created.key));
      }
      const [a, b] = [await storedKey(org.id, first.id), await storedKey(org.id, second.id)];
      expect(a.key_salt).not.toBe(b.key_salt);
      expect(a.key_hash).not.toBe(b.key_hash);
      expect(a.lookup_digest).not.toBe(b.lookup_digest);
      const digests = await asOwnerInTenant(t, org.id, (trx) =>
        trx
          .selectFrom('api_keys')
          .select(['lookup_digest'])
          .where('lookup_digest', 'in', [a.lookup_digest, b.lookup_digest])
          .execute(),
      );
      expect(digests).toHaveLength(2);
    });

    it('sorts and keeps the scopes, and stores an expiry given with an offset in UTC', async () => {
      const expiresAt = new Date(t.clock().getTime() + 86_400_000);
      const offset = `${new Date(expiresAt.getTime() + 2 * 3_600_000).toISOString().slice(0, 19)}+02:00`;
      const created = await createOk(org.owner.jar, {
        scopes: ['roles:read', 'api_keys:read', 'members:read'],
        expiresAt: offset,
      });
      expect(created.scopes).toEqual(['api_keys:read', 'members:read', 'roles:read']);
      expect(created.expiresAt).toBe(new Date(Math.floor(expiresAt.getTime() / 1000) * 1000).toISOString());
      const row = await storedKey(org.id, created.id);
      expect(row.scopes).toEqual(['api_keys:read', 'members:read', 'roles:read']);
      expect(new Date(row.expires_at!).toISOString()).toBe(created.expiresAt);
    });

    it('accepts expiresAt null or absent as "never", and a future instant as given', async () => {
      expect((await createOk(org.owner.jar, { expiresAt: null })).expiresAt).toBeNull();
      expect((await createOk(org.owner.jar)).expiresAt).toBeNull();
      const future = new Date(t.clock().getTime() + 3_600_000).toISOString();
      const created = await createOk(org.owner.jar, { expiresAt: future });
      expect(created.expiresAt).toBe(future);
      expect(new Date((await storedKey(org.id, created.id)).expires_at!).toISOString()).toBe(future);
    });

    it('trims the name and takes 1..100 characters as sent', async () => {
      expect((await createOk(org.owner.jar, { name: '  spaced  ' })).name).toBe('spaced');
      expect((await createOk(org.owner.jar, { name: 'n'.repeat(100) })).name).toBe('n'.repeat(100));
      expect((await createOk(org.owner.jar, { name: '\u00a0Clé 日本 👩\u200d💻\u3000' })).name).toBe(
        'Clé 日本 👩\u200d💻',
      );
      // The length counts what was sent (the document's maxLength), blanks included.
      for (const name of ['', '   ', '\u3000', 'n'.repeat(101), ` ${'n'.repeat(100)}`, 42, null]) {
        await expectError(await create(org.owner.jar, { name, scopes: ['roles:read'] }), 400, 'VALIDATION_ERROR');
      }
      await expectError(await create(org.owner.jar, { scopes: ['roles:read'] }), 400, 'VALIDATION_ERROR');
    });

    it('refuses control characters and line breaks anywhere in the name, and stores nothing', async () => {
      const before = (await storedKeys(org.id)).length;
      for (const name of [
        'line\nbreak',
        'carriage\rreturn',
        'tab\there',
        '\tleading tab',
        'trailing newline\n',
        'nul\u0000',
        'escape\u001b[31m',
        'del\u007f',
        'c1\u0085',
        'sep\u2028',
        'para\u2029',
      ]) {
        const body = await expectError(
          await create(org.owner.jar, { name, scopes: ['roles:read'] }),
          400,
          'VALIDATION_ERROR',
        );
        expect(
          body.details?.map((d) => d.path),
          JSON.stringify(name),
        ).toContain('name');
      }
      expect((await storedKeys(org.id)).length).toBe(before);
    });
  });

  describe('refused creations write nothing', () => {
    async function expectNothingWritten(run: () => Promise<void>) {
      const keysBefore = (await storedKeys(org.id)).length;
      const auditBefore = (await auditRows(t, org.id)).length;
      await run();
      expect((await storedKeys(org.id)).length).toBe(keysBefore);
      expect((await auditRows(t, org.id)).length).toBe(auditBefore);
    }

    it('rejects scopes that are not <resource>:<action> (400 VALIDATION_ERROR, path scopes.N)', async () => {
      await expectNothingWritten(async () => {
        for (const scope of [
          'roles:fly',
          'x',
          'ROLES:READ',
          'roles:read ',
          'roles',
          ':read',
          'roles:read:write',
          'billing:read',
          '*',
          '',
        ]) {
          const body = await expectError(
            await create(org.owner.jar, { name: 'bad', scopes: ['members:read', scope] }),
            400,
            'VALIDATION_ERROR',
          );
          expect(
            body.details?.some((d) => d.path === 'scopes.1'),
            JSON.stringify(body),
          ).toBe(true);
        }
        // Well-formed but not a permission that exists (api_keys has read and write only).
        await expectError(
          await create(org.owner.jar, { name: 'bad', scopes: ['api_keys:delete'] }),
          400,
          'VALIDATION_ERROR',
        );
      });
    });

    it('rejects duplicate, empty, missing, non-array and more than 17 scopes', async () => {
      await expectNothingWritten(async () => {
        await expectError(
          await create(org.owner.jar, { name: 'dup', scopes: ['roles:read', 'roles:read'] }),
          400,
          'VALIDATION_ERROR',
        );
        await expectError(await create(org.owner.jar, { name: 'empty', scopes: [] }), 400, 'VALIDATION_ERROR');
        await expectError(await create(org.owner.jar, { name: 'none' }), 400, 'VALIDATION_ERROR');
        await expectError(
          await create(org.owner.jar, { name: 'string', scopes: 'roles:read' }),
          400,
          'VALIDATION_ERROR',
        );
        // 18 distinct well-formed strings: every permission plus api_keys:delete.
        const eighteen = ['users', 'organizations', 'members', 'invitations', 'roles', 'api_keys'].flatMap((r) =>
          ['read', 'write', 'delete'].map((a) => `${r}:${a}`),
        );
        expect(new Set(eighteen).size).toBe(18);
        const body = await expectError(
          await create(org.owner.jar, { name: 'many', scopes: eighteen }),
          400,
          'VALIDATION_ERROR',
        );
        expect(body.details?.some((d) => d.path === 'scopes')).toBe(true);
      });
    });

    it('rejects unknown body fields (tenantId, keyHash, createdBy, key, ...)', async () => {
      await expectNothingWritten(async () => {
        const extras: Record<string, unknown>[] = [
          { tenantId: other.id },
          { keyHash: 'a'.repeat(64) },
          { createdBy: admin.id },
          { key: `sk_live_${'a'.repeat(32)}` },
          { keySalt: 'b'.repeat(32) },
          { revokedAt: null },
          { id: crypto.randomUUID() },
        ];
        for (const extra of extras) {
          await expectError(
            await create(org.owner.jar, { name: 'extra', scopes: ['roles:read'], ...extra }),
            400,
            'VALIDATION_ERROR',
          );
        }
      });
      // Nor did anything land in the organization the body named.
      expect(await storedKeys(other.id)).toEqual([]);
    });

    it('rejects an expiry in the past, at this instant, or not an ISO timestamp', async () => {
      await expectNothingWritten(async () => {
        const now = t.clock().getTime();
        for (const expiresAt of [
          new Date(now - 1000).toISOString(),
          new Date(now).toISOString(),
          '2020-01-01T00:00:00Z',
          'tomorrow',
          '2099-13-01T00:00:00Z',
          1893456000000,
          '',
        ]) {
          await expectError(
            await create(org.owner.jar, { name: 'exp', scopes: ['roles:read'], expiresAt }),
            400,
            'VALIDATION_ERROR',
          );
        }
      });
    });

    it('refuses an expiry past year 9999, with a 5+ digit or signed year, or an offset beyond ±14:00', async () => {
      await expectNothingWritten(async () => {
        for (const expiresAt of [
          '10000-01-01T00:00:00Z',
          '+010000-01-01T00:00:00Z',
          '+002030-01-01T00:00:00Z',
          '-000001-01-01T00:00:00Z',
          '275760-09-13T00:00:00Z',
          // Year 9999 locally, year 10000 in UTC: would be echoed as `+010000-…`.
          '9999-12-31T23:59:59-14:00',
          '9999-12-31T23:59:59.999-00:01',
          '2030-01-01T00:00:00+25:00',
          '2030-01-01T00:00:00+14:01',
          '2030-01-01T00:00:00-14:30',
          '2030-01-01T00:00:00+23:59',
          '2030-01-01T00:00:00+05:60',
          '2030-01-01T00:00:00+0530',
          '2030-01-01T00:00:00+05',
          '2030-01-01T00:00:00',
          '2030-01-01',
          '2030-01-01T00:00Z',
        ]) {
          const body = await expectError(
            await create(org.owner.jar, { name: 'exp', scopes: ['roles:read'], expiresAt }),
            400,
            'VALIDATION_ERROR',
          );
          expect(
            body.details?.map((d) => d.path),
            expiresAt,
          ).toContain('expiresAt');
          expect(JSON.stringify(body), expiresAt).not.toContain('+010000');
        }
      });
    });

    it('accepts offsets within ±14:00 and instants up to the end of 9999, and always echoes plain ISO in UTC', async () => {
      const cases: [string, string][] = [
        ['2030-01-01T00:00:00+05:30', '2029-12-31T18:30:00.000Z'],
        ['2030-01-01T00:00:00+14:00', '2029-12-31T10:00:00.000Z'],
        ['2030-01-01T00:00:00-14:00', '2030-01-01T14:00:00.000Z'],
        ['2030-01-01T00:00:00-00:00', '2030-01-01T00:00:00.000Z'],
        ['2030-06-15T12:34:56.789123Z', '2030-06-15T12:34:56.789Z'],
        ['9999-12-31T23:59:59+14:00', '9999-12-31T09:59:59.000Z'],
        ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
      ];
      for (const [given, echoed] of cases) {
        const created = await createOk(org.owner.jar, { expiresAt: given });
        expect(created.expiresAt, given).toBe(echoed);
        expect(created.expiresAt, given).toMatch(ISO);
        expect(new Date((await storedKey(org.id, created.id)).expires_at!).toISOString(), given).toBe(echoed);
        const inList = (await listed(org.owner.jar)).find((k) => k.id === created.id);
        expect(inList?.expiresAt, given).toBe(echoed);
      }
    });

    it('rejects malformed JSON (400) and a non-JSON body (415)', async () => {
      await expectNothingWritten(async () => {
        await expectError(await create(org.owner.jar, '{"name":'), 400, 'VALIDATION_ERROR');
        await expectError(
          await create(org.owner.jar, [{ name: 'array', scopes: ['roles:read'] }]),
          400,
          'VALIDATION_ERROR',
        );
        await expectError(
          await call(t, '/api/api-keys', {
            body: 'name=x',
            jar: org.owner.jar,
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
          }),
          415,
          'UNSUPPORTED_MEDIA_TYPE',
        );
      });
    });

    it('refuses scopes the caller does not hold: 403 INSUFFICIENT_PERMISSIONS naming them', async () => {
      // keymaker's role is api_keys:write + roles:read.
      await expectNothingWritten(async () => {
        const body = await expectError(
          await create(keymaker.jar, { name: 'too much', scopes: ['roles:read', 'members:write'] }),
          403,
          'INSUFFICIENT_PERMISSIONS',
        );
        expect(body.message).toBe('Insufficient permissions');
        const named = JSON.stringify(body.details);
        expect(named).toContain('members:write');
        expect(named).not.toContain('roles:read');

        const several = await expectError(
          await create(keymaker.jar, { name: 'too much', scopes: ['users:delete', 'api_keys:read', 'roles:read'] }),
          403,
          'INSUFFICIENT_PERMISSIONS',
        );
        expect(JSON.stringify(several.details)).toContain('users:delete');
        expect(JSON.stringify(several.details)).toContain('api_keys:read');

        // An Admin lacks organizations:delete and users:delete.
        const adminBody = await expectError(
          await create(admin.jar, { name: 'admin', scopes: ['organizations:delete'] }),
          403,
          'INSUFFICIENT_PERMISSIONS',
        );
        expect(JSON.stringify(adminBody.details)).toContain('organizations:delete');
      });
      // Within its own permissions keymaker may create.
      const ok = await createOk(keymaker.jar, { scopes: ['roles:read', 'api_keys:write'] });
      expect(ok.scopes).toEqual(['api_keys:write', 'roles:read']);
      expect(ok.createdBy).toBe(keymaker.id);
    });

    it('requires api_keys:write (Member: 403) and a session (401)', async () => {
      await expectNothingWritten(async () => {
        await expectError(
          await create(member.jar, { name: 'member', scopes: ['roles:read'] }),
          403,
          'INSUFFICIENT_PERMISSIONS',
        );
        await expectError(
          await call(t, '/api/api-keys', { body: { name: 'anon', scopes: ['roles:read'] } }),
          401,
          'UNAUTHORIZED',
        );
      });
    });

    it('requires an active organization (403 NO_ACTIVE_ORGANIZATION)', async () => {
      const loner = await signedInUser(t);
      const body = await expectError(
        await create(loner.jar, { name: 'loner', scopes: ['roles:read'] }),
        403,
        'NO_ACTIVE_ORGANIZATION',
      );
      expect(body.message).toBe('No active organization');
      await expectError(await list(loner.jar), 403, 'NO_ACTIVE_ORGANIZATION');
    });
  });

  describe('listing', () => {
    it('requires api_keys:read (a role with api_keys:write alone: 403) and a session (401)', async () => {
      await expectError(await list(keymaker.jar), 403, 'INSUFFICIENT_PERMISSIONS');
      await expectError(await call(t, '/api/api-keys'), 401, 'UNAUTHORIZED');
      expect((await listed(member.jar)).length).toBeGreaterThan(0);
    });

    it('has exactly the contract fields, never the key, hash, salt or digest, newest first', async () => {
      const created = await createOk(org.owner.jar, { name: 'listed', scopes: ['members:read'] });
      const stored = await storedKey(org.id, created.id);
      const response = await list(member.jar);
      const text = await response.clone().text();
      const keys = await expectStatus<ListedKey[]>(response, 200);
      for (const key of keys) expect(Object.keys(key).sort()).toEqual(LISTED_FIELDS);
      for (const secret of [created.key, stored.key_hash, stored.key_salt, stored.lookup_digest])
        expect(text).not.toContain(secret);
      expect(text).not.toMatch(ANY_KEY);
      const { key: _key, ...rest } = created;
      expect(keys.find((k) => k.id === created.id)).toEqual({ ...rest, revokedAt: null, lastUsedAt: null });
      const times = keys.map((k) => Date.parse(k.createdAt));
      expect(times).toEqual([...times].sort((a, b) => b - a));
    });

    it("lists the active organization's keys only, for a user who belongs to two", async () => {
      const dual = await newMember(t, org, 'admin');
      await addMember(t, other, dual, 'admin'); // now active in `other`
      const inOther = await createOk(dual.jar, { name: 'dual in other' });
      await setActive(t, dual, org.id);
      const inOrg = await createOk(dual.jar, { name: 'dual in org' });

      const orgList = (await listed(dual.jar)).map((k) => k.id);
      expect(orgList).toContain(inOrg.id);
      expect(orgList).not.toContain(inOther.id);
      expect([...orgList].sort()).toEqual((await storedKeys(org.id)).map((k) => k.id).sort());

      await setActive(t, dual, other.id);
      const otherList = (await listed(dual.jar)).map((k) => k.id);
      expect(otherList).toContain(inOther.id);
      expect(otherList).not.toContain(inOrg.id);
      expect([...otherList].sort()).toEqual((await storedKeys(other.id)).map((k) => k.id).sort());
      expect((await listed(other.owner.jar)).map((k) => k.id).sort()).toEqual([...otherList].sort());
    });
  });

  describe('revocation', () => {
    it('answers { id, revoked: true, revokedAt }, the same again, with one audit entry', async () => {
      const created = await createOk(org.owner.jar);
      const first = await expectStatus<{ id: string; revoked: boolean; revokedAt: string }>(
        await revoke(org.owner.jar, created.id),
        200,
      );
      expect(Object.keys(first).sort()).toEqual(['id', 'revoked', 'revokedAt']);
      expect(first).toMatchObject({ id: created.id, revoked: true });
      expect(first.revokedAt).toMatch(ISO);
      // Another caller with api_keys:write gets the same answer.
      for (const jar of [org.owner.jar, admin.jar, keymaker.jar]) {
        expect(await expectStatus(await revoke(jar, created.id), 200)).toEqual(first);
      }
      const revokedEntries = (await auditRows(t, org.id, 'api_key.revoked')).filter(
        (r) => r.metadata.keyId === created.id,
      );
      expect(revokedEntries).toHaveLength(1);
      expect(revokedEntries[0]!.actor_id).toBe(org.owner.id);

      const row = await storedKey(org.id, created.id);
      expect(new Date(row.revoked_at!).toISOString()).toBe(first.revokedAt);
      expect((await listed(org.owner.jar)).find((k) => k.id === created.id)?.revokedAt).toBe(first.revokedAt);
    });

    it("answers 404 for another organization's key, and leaves it active", async () => {
      const foreign = await createOk(other.owner.jar, { name: 'foreign' });
      const body = await expectError(await revoke(org.owner.jar, foreign.id), 404, 'NOT_FOUND');
      expect(JSON.stringify(body)).not.toContain(other.id);
      expect((await storedKey(other.id, foreign.id)).revoked_at).toBeNull();
      expect((await listed(other.owner.jar)).find((k) => k.id === foreign.id)?.revokedAt).toBeNull();
      expect((await auditRows(t, other.id, 'api_key.revoked')).filter((r) => r.metadata.keyId === foreign.id)).toEqual(
        [],
      );
      expect((await auditRows(t, org.id, 'api_key.revoked')).filter((r) => r.metadata.keyId === foreign.id)).toEqual(
        [],
      );
      // Its own organization can still revoke it.
      await expectStatus(await revoke(other.owner.jar, foreign.id), 200);
    });

    it('answers 404 for an unknown id and 400 for an id that is not a UUID v4', async () => {
      await expectError(await revoke(org.owner.jar, crypto.randomUUID()), 404, 'NOT_FOUND');
      for (const id of ['not-a-uuid', '123', '6ba7b810-9dad-11d1-80b4-00c04fd430c8', `${crypto.randomUUID()}x`]) {
        await expectError(await revoke(org.owner.jar, id), 400, 'VALIDATION_ERROR');
      }
    });

    it('requires api_keys:write (Member: 403) and a session (401), leaving the key active', async () => {
      const created = await createOk(org.owner.jar);
      await expectError(await revoke(member.jar, created.id), 403, 'INSUFFICIENT_PERMISSIONS');
      await expectError(await call(t, `/api/api-keys/${created.id}`, { method: 'DELETE' }), 401, 'UNAUTHORIZED');
      expect((await storedKey(org.id, created.id)).revoked_at).toBeNull();
      expect((await auditRows(t, org.id, 'api_key.revoked')).filter((r) => r.metadata.keyId === created.id)).toEqual(
        [],
      );
    });
  });

  describe('audit entries', () => {
    it('api_key.created and api_key.revoked carry actor, organization and { keyId, name, scopes, expiresAt } only', async () => {
      const expiresAt = new Date(t.clock().getTime() + 7 * 86_400_000).toISOString();
      const created = await createOk(admin.jar, { name: 'audited', scopes: ['roles:read', 'members:read'], expiresAt });
      await expectStatus(await revoke(keymaker.jar, created.id), 200);
      const stored = await storedKey(org.id, created.id);
      const metadata = { keyId: created.id, name: 'audited', scopes: ['members:read', 'roles:read'], expiresAt };

      const createdEntries = (await auditRows(t, org.id, 'api_key.created')).filter(
        (r) => r.metadata.keyId === created.id,
      );
      const revokedEntries = (await auditRows(t, org.id, 'api_key.revoked')).filter(
        (r) => r.metadata.keyId === created.id,
      );
      expect(createdEntries).toHaveLength(1);
      expect(revokedEntries).toHaveLength(1);
      expect(createdEntries[0]).toMatchObject({ action: 'api_key.created', actor_id: admin.id, tenant_id: org.id });
      expect(revokedEntries[0]).toMatchObject({ action: 'api_key.revoked', actor_id: keymaker.id, tenant_id: org.id });
      expect(createdEntries[0]!.metadata).toEqual(metadata);
      expect(revokedEntries[0]!.metadata).toEqual(metadata);
      for (const entry of [...createdEntries, ...revokedEntries]) {
        const text = JSON.stringify(entry);
        for (const secret of [created.key, stored.key_hash, stored.key_salt, stored.lookup_digest])
          expect(text).not.toContain(secret);
      }

      // The same entries through the API (organizations:read).
      const { items } = await expectStatus<{
        items: { action: string; actorId: string; organizationId: string; metadata: unknown }[];
      }>(await call(t, '/api/audit-logs?limit=100', { jar: member.jar }), 200);
      const mine = items.filter((i) => (i.metadata as { keyId?: string }).keyId === created.id);
      expect(mine.map((i) => [i.action, i.actorId, i.organizationId, i.metadata])).toEqual([
        ['api_key.revoked', keymaker.id, org.id, metadata],
        ['api_key.created', admin.id, org.id, metadata],
      ]);
    });
  });

  describe('the key is shown once', () => {
    it('appears in no later response and in no log line', async () => {
      const created = await createOk(org.owner.jar, { name: 'secret', scopes: ['roles:read'] });
      const stored = await storedKey(org.id, created.id);
      const secrets = [created.key, created.key.slice('sk_live_'.length), stored.key_hash, stored.key_salt];

      const later: Response[] = [
        await list(org.owner.jar),
        await list(member.jar),
        await revoke(org.owner.jar, created.id),
        await revoke(org.owner.jar, created.id),
        await call(t, '/api/audit-logs?limit=100', { jar: org.owner.jar }),
        await call(t, '/api/session', { jar: org.owner.jar }),
        await call(t, '/api/members', { jar: org.owner.jar }),
        await call(t, '/api/api-keys', { headers: { authorization: `Bearer ${created.key}` } }),
      ];
      for (const response of later) {
        const text = `${JSON.stringify([...response.headers])}\n${await response.text()}`;
        for (const secret of secrets) expect(text).not.toContain(secret);
      }
      const logs = JSON.stringify(t.logger.lines);
      for (const secret of secrets) expect(logs).not.toContain(secret);
      // No key of any test in this file reached a log line.
      expect(logs).not.toMatch(ANY_KEY);
    });
  });

  describe('a key authenticates nothing (API_KEY_AUTH disabled)', () => {
    it('Authorization: Bearer <valid key> without a session is 401 on every key route, and changes nothing', async () => {
      const created = await createOk(org.owner.jar, { scopes: ['api_keys:read', 'api_keys:write'] });
      const bearer = { authorization: `Bearer ${created.key}` };
      await expectError(await call(t, '/api/api-keys', { headers: bearer }), 401, 'UNAUTHORIZED');
      await expectError(
        await call(t, '/api/api-keys', { headers: bearer, body: { name: 'via key', scopes: ['roles:read'] } }),
        401,
        'UNAUTHORIZED',
      );
      await expectError(
        await call(t, `/api/api-keys/${created.id}`, { method: 'DELETE', headers: bearer }),
        401,
        'UNAUTHORIZED',
      );
      await expectError(await call(t, '/api/audit-logs', { headers: bearer }), 401, 'UNAUTHORIZED');
      expect(await expectStatus(await call(t, '/api/session', { headers: bearer }), 200)).toBeNull();
      const row = await storedKey(org.id, created.id);
      expect(row.revoked_at).toBeNull();
      expect(row.last_used_at).toBeNull();
    });
  });

  describe('organization deletion', () => {
    it("revokes the organization's active keys with one api_key.revoked entry each; an Admin may not delete", async () => {
      const doomed = await createOrganization(t, await signedInUser(t, { name: 'Doris Doomed' }));
      const doomedAdmin = await newMember(t, doomed, 'admin');
      const a = await createOk(doomed.owner.jar, { name: 'a' });
      const b = await createOk(doomedAdmin.jar, { name: 'b', scopes: ['members:read', 'roles:read'] });
      const gone = await createOk(doomed.owner.jar, { name: 'already revoked' });
      const goneAnswer = await expectStatus<{ revokedAt: string }>(await revoke(doomed.owner.jar, gone.id), 200);
      const revokedBefore = (await auditRows(t, doomed.id, 'api_key.revoked')).length;
      expect(revokedBefore).toBe(1);

      // An Admin lacks organizations:delete: refused, nothing revoked.
      await expectError(
        await call(t, '/api/auth/organization/delete', { body: { organizationId: doomed.id }, jar: doomedAdmin.jar }),
        403,
        'INSUFFICIENT_PERMISSIONS',
      );
      expect(
        (await storedKeys(doomed.id))
          .filter((k) => k.revoked_at === null)
          .map((k) => k.id)
          .sort(),
      ).toEqual([a.id, b.id].sort());
      expect(await auditRows(t, doomed.id, 'api_key.revoked')).toHaveLength(revokedBefore);
      expect((await listed(doomedAdmin.jar)).filter((k) => k.revokedAt === null)).toHaveLength(2);

      // Nor may the Owner of another organization delete it.
      await expectStatus(
        await call(t, '/api/auth/organization/delete', { body: { organizationId: doomed.id }, jar: other.owner.jar }),
        403,
      );
      expect((await storedKeys(doomed.id)).filter((k) => k.revoked_at === null)).toHaveLength(2);

      // The Owner may.
      await expectStatus(
        await call(t, '/api/auth/organization/delete', { body: { organizationId: doomed.id }, jar: doomed.owner.jar }),
        200,
      );
      const keys = await storedKeys(doomed.id);
      expect(keys).toHaveLength(3);
      for (const key of keys) expect(key.revoked_at).not.toBeNull();
      expect(new Date((await storedKey(doomed.id, gone.id)).revoked_at!).toISOString()).toBe(goneAnswer.revokedAt);

      const entries = (await auditRows(t, doomed.id, 'api_key.revoked')).slice(revokedBefore);
      expect(entries.map((e) => e.metadata.keyId).sort()).toEqual([a.id, b.id].sort());
      for (const entry of entries) {
        expect(entry).toMatchObject({ actor_id: doomed.owner.id, tenant_id: doomed.id });
        const key = entry.metadata.keyId === a.id ? a : b;
        expect(entry.metadata).toMatchObject({ keyId: key.id, name: key.name, scopes: key.scopes, expiresAt: null });
        for (const field of ['key', 'keyHash', 'keySalt', 'hash', 'salt', 'lookupDigest'])
          expect(entry.metadata).not.toHaveProperty(field);
        const text = JSON.stringify(entry);
        expect(text).not.toContain(key.key);
        expect(text).not.toMatch(ANY_KEY);
      }
      // Keys of other organizations were not touched.
      expect((await storedKeys(org.id)).some((k) => k.revoked_at === null)).toBe(true);
    });
  });
});
