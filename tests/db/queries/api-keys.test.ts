import { type Kysely, sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../../src/db/database.js';
import { revokeKeys } from '../../../src/db/queries/api-keys.js';
import { createTestApp, type TestApp } from '../../support/app.js';
import { type CookieJar, call, expectStatus } from '../../support/http.js';
import {
  addMember,
  asOwnerInTenant,
  auditRows,
  createOrganization,
  newMember,
  setActive,
  type TestMember,
  type TestOrganization,
} from '../../support/orgs.js';
import { signedInUser } from '../../support/users.js';

/**
 * API keys and the audit log at the database: the runtime role's grants
 * (migrations 0003, 0004), concurrent revocation (one audit entry: docs/api.md "API keys"),
 * and revoking a user's keys in every organization (a user deleted).
 * Runs on PGlite (`npm test`) and on PostgreSQL (`npm run test:integration`).
 */

interface CreatedKey {
  id: string;
  name: string;
  scopes: string[];
  expiresAt: string | null;
  key: string;
}

interface StoredKey {
  id: string;
  tenant_id: string;
  created_by: string;
  name: string;
  key_hash: string;
  key_salt: string;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** The driver's error, whichever driver (pg under PGlite, postgres.js on the server). */
async function pgError(run: () => Promise<unknown>): Promise<{ code?: string; message: string }> {
  try {
    await run();
  } catch (error) {
    return error as { code?: string; message: string };
  }
  throw new Error('expected the statement to be refused');
}

describe('API keys at the database', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let dual: TestMember;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
    other = await createOrganization(t, await signedInUser(t));
    dual = await newMember(t, org, 'admin');
    await addMember(t, other, dual, 'admin');
    await setActive(t, dual, org.id);
  });
  afterAll(() => t.close());

  async function createKey(
    jar: CookieJar,
    name = `key ${crypto.randomUUID().slice(0, 6)}`,
    scopes = ['roles:read'],
  ): Promise<CreatedKey> {
    return expectStatus<CreatedKey>(await call(t, '/api/api-keys', { body: { name, scopes }, jar }), 201);
  }

  function storedKey(tenantId: string, id: string): Promise<StoredKey | undefined> {
    return asOwnerInTenant(
      t,
      tenantId,
      (trx) =>
        trx.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst() as Promise<
          StoredKey | undefined
        >,
    );
  }

  /** A transaction of the runtime role (t.db) naming `tenantId`. */
  function asRuntime<T>(tenantId: string | null, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
    return (t.db as Kysely<Database>).transaction().execute(async (trx) => {
      if (tenantId) await sql`select set_config('app.tenant_id', ${tenantId}, true)`.execute(trx);
      return fn(trx);
    });
  }

  describe('grants of the runtime role', () => {
    it('the audit log is append-only: UPDATE, DELETE and TRUNCATE are denied (42501), even with the tenant named', async () => {
      const key = await createKey(org.owner.jar);
      const [entry] = (await auditRows(t, org.id, 'api_key.created')).filter((r) => r.metadata.keyId === key.id);
      expect(entry).toBeDefined();

      // The runtime role can see it (SELECT is granted)...
      const seen = await asRuntime(org.id, (trx) =>
        trx.selectFrom('audit_logs').select('id').where('id', '=', entry!.id).execute(),
      );
      expect(seen).toHaveLength(1);

      // ...but not change or remove it.
      const attempts: [string, (trx: Transaction<Database>) => Promise<unknown>][] = [
        [
          'update metadata',
          (trx) =>
            trx
              .updateTable('audit_logs')
              .set({ metadata: JSON.stringify({ forged: true }) } as never)
              .where('id', '=', entry!.id)
              .execute(),
        ],
        [
          'update action',
          (trx) =>
            trx.updateTable('audit_logs').set({ action: 'api_key.revoked' }).where('id', '=', entry!.id).execute(),
        ],
        ['delete one', (trx) => trx.deleteFrom('audit_logs').where('id', '=', entry!.id).execute()],
        ['delete all', (trx) => trx.deleteFrom('audit_logs').execute()],
        ['truncate', (trx) => sql`truncate audit_logs`.execute(trx)],
      ];
      for (const [label, attempt] of attempts) {
        for (const tenant of [org.id, null]) {
          const error = await pgError(() => asRuntime(tenant, attempt));
          expect(error.code, `${label} (tenant ${tenant}): ${error.message}`).toBe('42501');
          expect(error.message).toMatch(/permission denied/i);
        }
      }
      const after = (await auditRows(t, org.id)).find((r) => r.id === entry!.id);
      expect(after).toMatchObject({ action: 'api_key.created', metadata: entry!.metadata });
    });

    it('api_keys: DELETE and UPDATE of anything but revoked_at / last_used_at are denied (42501)', async () => {
      const key = await createKey(org.owner.jar);
      const before = await storedKey(org.id, key.id);
      const attempts: [string, (trx: Transaction<Database>) => Promise<unknown>][] = [
        ['delete', (trx) => trx.deleteFrom('api_keys').where('id', '=', key.id).execute()],
        [
          'update key_hash',
          (trx) =>
            trx
              .updateTable('api_keys')
              .set({ key_hash: 'a'.repeat(64) })
              .where('id', '=', key.id)
              .execute(),
        ],
        [
          'update key_salt',
          (trx) =>
            trx
              .updateTable('api_keys')
              .set({ key_salt: 'b'.repeat(32) })
              .where('id', '=', key.id)
              .execute(),
        ],
        [
          'update lookup_digest',
          (trx) =>
            trx
              .updateTable('api_keys')
              .set({ lookup_digest: 'c'.repeat(64) })
              .where('id', '=', key.id)
              .execute(),
        ],
        [
          'update scopes',
          (trx) =>
            trx
              .updateTable('api_keys')
              .set({ scopes: ['users:delete'] })
              .where('id', '=', key.id)
              .execute(),
        ],
        [
          'update tenant_id',
          (trx) => trx.updateTable('api_keys').set({ tenant_id: other.id }).where('id', '=', key.id).execute(),
        ],
        [
          'update created_by',
          (trx) => trx.updateTable('api_keys').set({ created_by: dual.id }).where('id', '=', key.id).execute(),
        ],
        [
          'update expires_at',
          (trx) => trx.updateTable('api_keys').set({ expires_at: null }).where('id', '=', key.id).execute(),
        ],
        [
          'update revoked_at and key_hash',
          (trx) =>
            trx
              .updateTable('api_keys')
              .set({ revoked_at: sql`now()`, key_hash: 'a'.repeat(64) })
              .where('id', '=', key.id)
              .execute(),
        ],
        ['truncate', (trx) => sql`truncate api_keys`.execute(trx)],
      ];
      for (const [label, attempt] of attempts) {
        const error = await pgError(() => asRuntime(org.id, attempt));
        expect(error.code, `${label}: ${error.message}`).toBe('42501');
        expect(error.message).toMatch(/permission denied/i);
      }
      expect(await storedKey(org.id, key.id)).toEqual(before);

      // Marking it revoked and noting its last use are allowed.
      const updated = await asRuntime(org.id, (trx) =>
        trx
          .updateTable('api_keys')
          .set({ revoked_at: sql`now()`, last_used_at: sql`now()` })
          .where('id', '=', key.id)
          .returning(['revoked_at', 'last_used_at'])
          .executeTakeFirst(),
      );
      expect(updated?.revoked_at).toBeInstanceOf(Date);
      expect(updated?.last_used_at).toBeInstanceOf(Date);
      const after = await storedKey(org.id, key.id);
      expect(after?.revoked_at).not.toBeNull();
      expect(after).toMatchObject({ key_hash: before!.key_hash, key_salt: before!.key_salt, name: before!.name });
    });

    it("row-level security: another tenant's keys are invisible and cannot be written", async () => {
      const key = await createKey(org.owner.jar);
      expect(
        await asRuntime(other.id, (trx) => trx.selectFrom('api_keys').select('id').where('id', '=', key.id).execute()),
      ).toEqual([]);
      expect(
        await asRuntime(null, (trx) => trx.selectFrom('api_keys').select('id').where('id', '=', key.id).execute()),
      ).toEqual([]);
      const revoked = await asRuntime(other.id, (trx) =>
        trx.updateTable('api_keys').set({ revoked_at: sql`now()` }).where('id', '=', key.id).returning('id').execute(),
      );
      expect(revoked).toEqual([]);
      expect((await storedKey(org.id, key.id))?.revoked_at).toBeNull();
      // Another tenant's audit entries are invisible too.
      expect(
        await asRuntime(other.id, (trx) =>
          trx.selectFrom('audit_logs').select('id').where('tenant_id', '=', org.id).execute(),
        ),
      ).toEqual([]);
    });
  });

  describe('audit metadata', () => {
    it('is stored as a JSON object (not a JSON string) and served as one', async () => {
      const key = await createKey(org.owner.jar, 'typed', ['members:read', 'roles:read']);
      const rows = await asOwnerInTenant(t, org.id, (trx) =>
        sql<{
          type: string;
          key_id: string | null;
        }>`select jsonb_typeof(metadata) as type, metadata->>'keyId' as key_id from audit_logs where tenant_id = ${org.id} and action = 'api_key.created' and metadata->>'keyId' = ${key.id}`.execute(
          trx,
        ),
      );
      expect(rows.rows).toEqual([{ type: 'object', key_id: key.id }]);
      const { items } = await expectStatus<{ items: { metadata: unknown }[] }>(
        await call(t, '/api/audit-logs?limit=1', { jar: org.owner.jar }),
        200,
      );
      expect(items[0]!.metadata).toEqual({
        keyId: key.id,
        name: 'typed',
        scopes: ['members:read', 'roles:read'],
        expiresAt: null,
      });
    });
  });

  describe('concurrent revocation', () => {
    it('twenty concurrent revokes of one key: all 200 with one revokedAt, exactly one api_key.revoked entry', async () => {
      const key = await createKey(org.owner.jar, 'contested');
      const jars = [org.owner.jar, dual.jar];
      const responses = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          call(t, `/api/api-keys/${key.id}`, { method: 'DELETE', jar: jars[i % 2] }),
        ),
      );
      const bodies = await Promise.all(
        responses.map((r) => expectStatus<{ id: string; revoked: boolean; revokedAt: string }>(r, 200)),
      );
      expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
      expect(bodies[0]).toMatchObject({ id: key.id, revoked: true });

      const entries = (await auditRows(t, org.id, 'api_key.revoked')).filter((r) => r.metadata.keyId === key.id);
      expect(entries).toHaveLength(1);
      const stored = await storedKey(org.id, key.id);
      expect(new Date(stored!.revoked_at!).toISOString()).toBe(bodies[0]!.revokedAt);
    });

    it('concurrent revokes of different keys all succeed, one entry each', async () => {
      const keys = await Promise.all(Array.from({ length: 6 }, (_, i) => createKey(org.owner.jar, `parallel ${i}`)));
      const responses = await Promise.all(
        keys.flatMap((k) =>
          [0, 1, 2].map(() => call(t, `/api/api-keys/${k.id}`, { method: 'DELETE', jar: org.owner.jar })),
        ),
      );
      for (const response of responses) await expectStatus(response, 200);
      const entries = await auditRows(t, org.id, 'api_key.revoked');
      for (const key of keys) expect(entries.filter((e) => e.metadata.keyId === key.id)).toHaveLength(1);
    });
  });

  describe('revokeKeys of a user', () => {
    it("revokes a user's active keys in every organization, one api_key.revoked entry each, in its organization", async () => {
      const user = await newMember(t, org, 'admin');
      await addMember(t, other, user, 'admin');
      const inOther = await createKey(user.jar, 'user in other', ['members:read']);
      await setActive(t, user, org.id);
      const inOrgA = await createKey(user.jar, 'user in org a');
      const inOrgB = await createKey(user.jar, 'user in org b', ['roles:read', 'api_keys:read']);
      const alreadyRevoked = await createKey(user.jar, 'user revoked');
      await expectStatus(await call(t, `/api/api-keys/${alreadyRevoked.id}`, { method: 'DELETE', jar: user.jar }), 200);
      const bystander = await createKey(org.owner.jar, 'owner key');
      const bystanderOther = await createKey(other.owner.jar, 'other owner key');
      const revokedBefore = {
        org: (await auditRows(t, org.id, 'api_key.revoked')).length,
        other: (await auditRows(t, other.id, 'api_key.revoked')).length,
      };

      const actorId = crypto.randomUUID();
      const result = await t.db.transaction().execute(async (trx) => {
        const count = (await revokeKeys(trx, { createdBy: user.id, actorId, reason: 'account_purged' })).length;
        const { rows } = await sql<{
          tenant: string;
          owner: string;
        }>`select current_setting('app.tenant_id', true) as tenant, current_setting('app.key_owner_id', true) as owner`.execute(
          trx,
        );
        return { count, settings: rows[0] };
      });
      expect(result.count).toBe(3);
      // It leaves the transaction naming no tenant and no key owner.
      expect(result.settings).toEqual({ tenant: '', owner: '' });

      for (const [tenant, key] of [
        [org.id, inOrgA],
        [org.id, inOrgB],
        [other.id, inOther],
      ] as const) {
        expect((await storedKey(tenant, key.id))?.revoked_at, key.name).not.toBeNull();
      }
      expect((await storedKey(org.id, bystander.id))?.revoked_at).toBeNull();
      expect((await storedKey(other.id, bystanderOther.id))?.revoked_at).toBeNull();

      const orgEntries = (await auditRows(t, org.id, 'api_key.revoked')).slice(revokedBefore.org);
      const otherEntries = (await auditRows(t, other.id, 'api_key.revoked')).slice(revokedBefore.other);
      expect(orgEntries.map((e) => e.metadata.keyId).sort()).toEqual([inOrgA.id, inOrgB.id].sort());
      expect(otherEntries.map((e) => e.metadata.keyId)).toEqual([inOther.id]);
      for (const [entry, key, tenant] of [
        ...orgEntries.map((e) => [e, e.metadata.keyId === inOrgA.id ? inOrgA : inOrgB, org.id] as const),
        [otherEntries[0]!, inOther, other.id] as const,
      ]) {
        expect(entry).toMatchObject({ action: 'api_key.revoked', actor_id: actorId, tenant_id: tenant });
        expect(entry.metadata).toEqual({
          keyId: key.id,
          name: key.name,
          scopes: key.scopes,
          expiresAt: null,
          reason: 'account_purged',
        });
        expect(JSON.stringify(entry)).not.toContain(key.key);
      }

      // Nothing left to revoke: a second run is a no-op with no new entries.
      expect(
        await t.db
          .transaction()
          .execute((trx) => revokeKeys(trx, { createdBy: user.id, actorId, reason: 'account_purged' })),
      ).toHaveLength(0);
      expect(await auditRows(t, org.id, 'api_key.revoked')).toHaveLength(revokedBefore.org + 2);
      expect(await auditRows(t, other.id, 'api_key.revoked')).toHaveLength(revokedBefore.other + 1);
    });
  });
});
