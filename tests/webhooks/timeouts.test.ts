import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { claimDue, settleAttempt } from '../../src/db/queries/webhook-deliveries.js';
import { LEASE_MARGIN_MS } from '../../src/webhooks/deliverer.js';
import { pinnedFetch } from '../../src/webhooks/pinned-fetch.js';
import type { WebhookFetch } from '../../src/webhooks/send.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { createOrganization, createRole, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';
import {
  createWebhook,
  deliveriesOf,
  receiverPool,
  startTarpit,
  type Tarpit,
  testDeliverer,
} from '../support/webhooks.js';

/**
 * Every send ends within its timeout (docs/webhooks.md "Sending"): the
 * deliverer's own timer, not AbortSignal.timeout combined with
 * AbortSignal.any, which on Node 20 a garbage collection can take before it
 * fires (the send then hung for the HTTP client's 300 s). Each test collects
 * garbage while the send is in flight (vitest.config.ts runs the workers with
 * --expose-gc). The receiver is a tarpit on loopback: it accepts the
 * connection and never answers. And a claimed delivery's lease outlasts the
 * longest send, so no other deliverer sends it meanwhile.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A full collection, twice (the second takes what the first only finalised). */
async function collectGarbage() {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== 'function') throw new Error('global.gc is missing: run with --expose-gc (vitest.config.ts)');
  gc();
  await sleep(20);
  gc();
}

describe('bounded webhook sends', () => {
  let t: TestApp;
  let org: TestOrganization;
  const receivers = receiverPool();
  const tarpits: Tarpit[] = [];
  const tarpit = async () => {
    const started = await startTarpit();
    tarpits.push(started);
    return started;
  };
  const newRole = () =>
    createRole(t, org.owner, { name: `r-${crypto.randomUUID().slice(0, 8)}`, permissions: ['roles:read'] });
  /** Resolves when `condition` holds, or fails after `ms`. */
  const until = async (condition: () => boolean, ms = 5_000) => {
    const deadline = Date.now() + ms;
    while (!condition()) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await sleep(10);
    }
  };

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
    org = await createOrganization(t, await signedInUser(t));
  });
  afterEach(async () => {
    const listed = await expectStatus<{ id: string }[]>(await call(t, '/api/webhooks', { jar: org.owner.jar }), 200);
    for (const { id } of listed) await call(t, `/api/webhooks/${id}`, { method: 'DELETE', jar: org.owner.jar });
    await receivers.closeAll();
    await Promise.all(tarpits.splice(0).map((started) => started.close()));
    t.clock.set(Date.now());
  });
  afterAll(() => t?.close());

  const transports: [string, () => WebhookFetch | undefined][] = [
    ['fetch (the Worker, and Node with private URLs allowed)', () => undefined],
    ['the pinned transport (Node)', () => pinnedFetch({ resolve: async () => ['127.0.0.1'], allowPrivate: true })],
  ];
  for (const [name, transport] of transports) {
    it(`ends a send to a receiver that never answers within its timeout, after a garbage collection: ${name}`, async () => {
      const silent = await tarpit();
      const webhook = await createWebhook(t, org.owner, {
        url: `${silent.origin.replace('127.0.0.1', 'tarpit.test.example')}/hook`,
        events: ['role.created'],
      });
      await newRole();
      const deliverer = testDeliverer(t, {
        timeoutMs: 1_000,
        fetch: transport() ?? ((url, init) => fetch(url.href.replace('tarpit.test.example', '127.0.0.1'), init)),
      });
      const started = Date.now();
      const run = deliverer.deliverDue();
      await until(() => silent.connections.now === 1);
      await collectGarbage();
      const outcome = await Promise.race([run, sleep(8_000).then(() => 'still waiting after 8 s')]);
      const took = Date.now() - started;
      expect(outcome).toEqual({ attempted: 1, succeeded: 0 });
      expect(took).toBeGreaterThanOrEqual(1_000);
      expect(took).toBeLessThan(2_500);
      const [record] = await deliveriesOf(t, org.owner, webhook.id);
      expect(record).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: null });
      expect(record!.lastError).toBe('TimeoutError: No answer within 1000 ms');
      // The connection is let go, not left to the receiver.
      await until(() => silent.connections.closed === 1, 2_000);
    });
  }

  it('bounds reading the answer too: a body that never ends is cut at the timeout', async () => {
    const trickling = await receivers.start(() => 'trickle');
    const webhook = await createWebhook(t, org.owner, { url: trickling.url, events: ['role.created'] });
    await newRole();
    const started = Date.now();
    const run = testDeliverer(t, { timeoutMs: 1_000 }).deliverDue();
    await until(() => trickling.received.length === 1);
    await collectGarbage();
    expect(await Promise.race([run, sleep(8_000).then(() => 'still waiting')])).toEqual({
      attempted: 1,
      succeeded: 0,
    });
    expect(Date.now() - started).toBeLessThan(2_500);
    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({ status: 'pending', attempts: 1 });
    expect(record!.lastError).toMatch(/TimeoutError/);
  });

  it("holds a claimed delivery's lease past the longest send: another deliverer takes nothing meanwhile, and the outcome is recorded", async () => {
    const silent = await tarpit();
    const webhook = await createWebhook(t, org.owner, { url: `${silent.origin}/hook`, events: ['role.created'] });
    await newRole();
    const timeoutMs = 1_500;
    const claimedAt = t.clock().getTime();
    const run = testDeliverer(t, { timeoutMs }).deliverDue();
    await until(() => silent.connections.now === 1);
    // Read as the deliverer reads (row-level security holds the table owner too on PostgreSQL).
    const leases = await t.db.transaction().execute(async (trx) => {
      await sql`SELECT set_config('app.webhook_deliverer', 'on', true)`.execute(trx);
      return trx
        .selectFrom('webhook_deliveries')
        .select('locked_until')
        .where('endpoint_id', '=', webhook.id)
        .execute();
    });
    expect(leases.map((row) => new Date(row.locked_until!).getTime() - claimedAt)).toEqual([
      timeoutMs + LEASE_MARGIN_MS,
    ]);
    await collectGarbage();
    // The longest the send can take has passed on the deliverers' clock: a second one (another instance) takes nothing.
    t.clock.advance(timeoutMs);
    expect(await testDeliverer(t, { timeoutMs }).deliverDue()).toEqual({ attempted: 0, succeeded: 0 });
    expect(await run).toEqual({ attempted: 1, succeeded: 0 });
    expect(silent.connections.requests).toBe(1);
    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: null });
    expect(record!.lastError).toMatch(/TimeoutError/);
  });

  it('drops an outcome whose lease has passed to another claim (the new claim decides)', async () => {
    const hook = await receivers.start();
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    await newRole();
    const now = t.clock();
    const [first] = await claimDue(t.db, { now, leaseUntil: new Date(now.getTime() + 1_000), limit: 10 });
    // The first claim's instance stalls past its lease; another claims the delivery.
    t.clock.advance(1_000);
    const later = t.clock();
    const [second] = await claimDue(t.db, { now: later, leaseUntil: new Date(later.getTime() + 1_000), limit: 10 });
    expect(second!.id).toBe(first!.id);
    const outcome = (leasedUntil: Date, succeeded: boolean) => ({
      id: first!.id,
      leasedUntil,
      endpointId: webhook.id,
      succeeded,
      statusCode: succeeded ? 200 : 500,
      error: succeeded ? null : 'HTTP 500',
      retryAt: succeeded ? null : new Date(later.getTime() + 5_000),
      now: later,
      endpointFailed: !succeeded,
      disable: null,
    });
    expect(await settleAttempt(t.db, outcome(second!.locked_until, true))).toBe(true);
    expect(await settleAttempt(t.db, outcome(first!.locked_until, false))).toBe(false);
    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({ status: 'succeeded', attempts: 2, lastStatusCode: 200, lastError: null });
  });
});
