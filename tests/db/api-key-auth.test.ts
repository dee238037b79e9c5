import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashKey, lookupDigest } from '../../src/auth/api-key-material.js';
import type { Database } from '../../src/db/database.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { type CookieJar, call, expectStatus } from '../support/http.js';
import { asOwnerInTenant, auditRows, createOrganization, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';

/**
 * API keys that authenticate (API_KEY_AUTH=enabled) under
 * concurrency, at the database: one key used by many requests at once, and a
 * revoke racing with the key's requests. Runs on PGlite (`npm test`) and on
 * PostgreSQL with a pool of connections (`npm run test:integration`).
 */

interface CreatedKey {
  id: string;
  key: string;
}

interface StoredKey {
  id: string;
  key_hash: string;
  key_salt: string;
  lookup_digest: string;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const PARALLEL = 20;

describe('API key authentication under concurrency', () => {
  let t: TestApp;
  let org: TestOrganization;

  beforeAll(async () => {
    t = await createTestApp({ env: { API_KEY_AUTH: 'enabled' } });
    org = await createOrganization(t, await signedInUser(t));
  });
  afterAll(() => t?.close());

  async function createKey(jar: CookieJar, scopes = ['roles:read']): Promise<CreatedKey> {
    return expectStatus<CreatedKey>(
      await call(t, '/api/api-keys', { body: { name: `key ${crypto.randomUUID().slice(0, 6)}`, scopes }, jar }),
      201,
    );
  }

  const useKey = (key: string) => call(t, '/api/roles', { headers: { authorization: `Bearer ${key}` } });

  function storedKey(id: string): Promise<StoredKey | undefined> {
    return asOwnerInTenant(
      t,
      org.id,
      (trx) =>
        trx.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst() as Promise<
          StoredKey | undefined
        >,
    );
  }

  /** The row once its lastUsedAt is written (the write does not hold up the response); bounded by count. */
  async function storedOnceUsed(id: string): Promise<StoredKey> {
    let row: StoredKey | undefined;
    for (let attempt = 0; attempt < 100; attempt += 1) {
      row = await storedKey(id);
      if (row?.last_used_at) return row;
      await new Promise((resolve) => setImmediate(resolve));
    }
    throw new Error(`last_used_at of ${id} was never written: ${JSON.stringify(row)}`);
  }

  it(`${PARALLEL} parallel requests with one key all succeed, and the row still verifies`, async () => {
    const created = await createKey(org.owner.jar);
    const responses = await Promise.all(Array.from({ length: PARALLEL }, () => useKey(created.key)));
    const statuses = await Promise.all(
      responses.map(async (response) => `${response.status} ${response.status === 200 ? '' : await response.text()}`),
    );
    expect(statuses).toEqual(Array.from({ length: PARALLEL }, () => '200 '));
    for (const response of responses.slice(0, 3)) {
      const roles = (await response.json()) as { slug: string }[];
      expect(roles.map((r) => r.slug)).toEqual(expect.arrayContaining(['owner', 'admin', 'member', 'viewer']));
    }

    const row = await storedOnceUsed(created.id);
    expect(row.revoked_at).toBeNull();
    expect(row.lookup_digest).toBe(lookupDigest(created.key));
    expect(row.key_hash).toBe(hashKey(created.key, row.key_salt));
    // Every request ran at the same instant of the injected clock: whichever wrote, it wrote that.
    expect(new Date(row.last_used_at!).toISOString()).toBe(t.clock().toISOString());

    // And it goes on working.
    await expectStatus(await useKey(created.key), 200);
  });

  it('the key lookup leaves nothing behind on the connections: a statement naming no tenant sees no key', async () => {
    const created = await createKey(org.owner.jar);
    await Promise.all(Array.from({ length: PARALLEL }, async () => expectStatus(await useKey(created.key), 200)));
    await storedOnceUsed(created.id);
    const counts = await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        const { rows } = await sql<{ n: number }>`select count(*)::int as n from api_keys`.execute(
          t.db as Kysely<Database>,
        );
        return rows[0]!.n;
      }),
    );
    expect(counts).toEqual(Array.from({ length: PARALLEL }, () => 0));
  });

  it('a revoke racing with the key: each request is served or refused, and after the revoke commits the next one is 401', async () => {
    for (let round = 0; round < 3; round += 1) {
      const created = await createKey(org.owner.jar);
      await expectStatus(await useKey(created.key), 200);

      const requests = Array.from({ length: PARALLEL }, () => useKey(created.key));
      const revoke = call(t, `/api/api-keys/${created.id}`, { method: 'DELETE', jar: org.owner.jar });
      const [revoked, ...responses] = await Promise.all([revoke, ...requests]);
      await expectStatus(revoked!, 200);
      for (const response of responses) {
        const text = await response.text();
        expect([200, 401], text).toContain(response.status);
        if (response.status === 401) expect(JSON.parse(text)).toMatchObject({ code: 'UNAUTHORIZED' });
      }

      // The revoke has committed: from here on the key is refused, every time.
      const after = await Promise.all(Array.from({ length: 5 }, () => useKey(created.key)));
      expect(after.map((r) => r.status)).toEqual([401, 401, 401, 401, 401]);
      expect((await storedKey(created.id))?.revoked_at).not.toBeNull();
      expect(
        (await auditRows(t, org.id, 'api_key.revoked')).filter((row) => row.metadata.keyId === created.id),
      ).toHaveLength(1);
    }
  });
});
