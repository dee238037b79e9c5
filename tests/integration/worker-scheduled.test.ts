import type { ExecutionContext } from 'hono';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import worker from '../../src/entries/worker.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { createOrganization } from '../support/orgs.js';
import { testServers, withDatabaseName } from '../support/servers.js';
import { signedInUser } from '../support/users.js';

/**
 * The Workers cron trigger (src/entries/worker.ts `scheduled`) against a real
 * PostgreSQL server: it reads DATABASE_URL from the bindings and runs the
 * same purge as POST /api/cron/purge-accounts, at the real time. Only in
 * the integration suite (the Workers entry cannot use the embedded engine).
 */

const DAY = 24 * 60 * 60 * 1000;

describe('worker scheduled handler', { timeout: 120_000 }, () => {
  let t: TestApp;
  let databaseUrl: string;

  beforeAll(async () => {
    const servers = testServers();
    if (!servers) throw new Error('the worker test runs only in the integration suite');
    t = await createTestApp();
    const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(t.db);
    databaseUrl = withDatabaseName(servers.pgAppUrl, rows[0]!.name);
  });
  afterAll(() => t?.close());

  it('purges the accounts whose grace period has ended, through waitUntil, and leaves the others', async () => {
    const now = Date.now();
    const due = await signedInUser(t);
    const org = await createOrganization(t, due);
    const key = await expectStatus<{ id: string }>(
      await call(t, '/api/api-keys', { body: { name: 'due key', scopes: ['roles:read'] }, jar: due.jar }),
      201,
    );
    const notYet = await signedInUser(t);
    t.clock.set(now - 31 * DAY);
    await expectStatus(await call(t, '/api/users/me/deletion', { method: 'POST', jar: due.jar }), 202);
    t.clock.set(now - 29 * DAY);
    await expectStatus(await call(t, '/api/users/me/deletion', { method: 'POST', jar: notYet.jar }), 202);

    const pending: Promise<unknown>[] = [];
    const ctx = {
      waitUntil: (promise: Promise<unknown>) => void pending.push(promise),
      passThroughOnException: () => {},
      props: {},
    } as unknown as ExecutionContext;
    const env = {
      NODE_ENV: 'production',
      AUTH_SECRET: `${crypto.randomUUID()}${crypto.randomUUID()}`,
      DATABASE_URL: databaseUrl,
      KV_REST_API_URL: 'https://kv.example.invalid',
      KV_REST_API_TOKEN: 'not-called',
      CRON_SECRET: `cron-${crypto.randomUUID()}`,
      EMAIL_API_KEY: 'not-used-no-mail-is-sent',
      LOG_LEVEL: 'error',
    };

    await worker.scheduled({ cron: '0 3 * * *', scheduledTime: now }, env, ctx);
    expect(pending.length).toBeGreaterThanOrEqual(1);
    await Promise.all(pending);

    const users = await t.database.withOwner((owner) =>
      owner.selectFrom('users').select('id').where('id', 'in', [due.id, notYet.id]).execute(),
    );
    expect(users.map((u: { id: string }) => u.id)).toEqual([notYet.id]);
    const keys = await t.database.withOwner((owner) =>
      owner.transaction().execute(async (trx) => {
        await sql`select set_config('app.tenant_id', ${org.id}, true)`.execute(trx);
        return trx.selectFrom('api_keys').select(['id', 'revoked_at']).where('tenant_id', '=', org.id).execute();
      }),
    );
    expect(keys.find((k: { id: string }) => k.id === key.id)?.revoked_at).not.toBeNull();
    await expectStatus(await call(t, '/api/users/me', { jar: due.jar }), 401);
    await expectStatus(await call(t, '/api/users/me', { jar: notYet.jar }), 200);
  });
});
