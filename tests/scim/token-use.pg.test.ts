import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { asOwnerInTenant, createOrganization } from '../support/orgs.js';
import { testServers } from '../support/servers.js';
import { signedInUser } from '../support/users.js';
import { mintToken } from './users-client.js';

/**
 * docs/scim.md "Tokens": a token's `lastUsedAt` is written by the request
 * that uses it, not after the answer, and never waits on a lock: no
 * database work of a SCIM request outlives it, so closing the pool right
 * after one never waits (postgres.js `end()` waits for every connection a
 * query still holds, and one handed back after it began was never closed).
 */
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

async function lastUsed(t: TestApp, tenantId: string, id: string) {
  const row = await asOwnerInTenant(t, tenantId, (trx) =>
    trx.selectFrom('scim_tokens').select('last_used_at').where('id', '=', id).executeTakeFirstOrThrow(),
  );
  return row.last_used_at;
}

describe('SCIM token use', () => {
  it('lastUsedAt is stamped by the time the answer comes', async () => {
    const t = await createTestApp();
    try {
      const org = await createOrganization(t, await signedInUser(t));
      const { token, id } = await mintToken(t, org);
      await expectStatus(await call(t, '/api/scim/v2/ServiceProviderConfig', { headers: bearer(token) }), 200);
      expect(await lastUsed(t, org.id, id)).toEqual(t.clock());
    } finally {
      await t.close();
    }
  });

  // PostgreSQL only: PGlite has one connection, so no other transaction can hold the row.
  it.runIf(testServers())('a use while the row is held answers at once, and the pool closes right after', async () => {
    const t = await createTestApp();
    let release = () => {};
    let holding: Promise<unknown> = Promise.resolve();
    let closed = false;
    try {
      const org = await createOrganization(t, await signedInUser(t));
      const { token, id } = await mintToken(t, org);
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked = () => {};
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      // Another transaction holds the token's row, as a revocation or a concurrent use does.
      holding = asOwnerInTenant(t, org.id, async (trx) => {
        const row = await sql`select id from scim_tokens where id = ${id} for update`.execute(trx);
        expect(row.rows).toHaveLength(1);
        locked();
        await held;
      });
      await isLocked;
      const started = Date.now();
      await expectStatus(await call(t, '/api/scim/v2/ServiceProviderConfig', { headers: bearer(token) }), 200);
      // Not held up by the lock (LOCK_TIMEOUT_MS is 5 s): this use's stamp is skipped.
      expect(Date.now() - started).toBeLessThan(2_500);
      expect(await lastUsed(t, org.id, id)).toBeNull();
      const closing = t.close().then(() => {
        closed = true;
      });
      release();
      await holding;
      await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, 8_000))]);
      expect(closed).toBe(true);
    } finally {
      release();
      await holding.catch(() => {});
    }
  });
});
