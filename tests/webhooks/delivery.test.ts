import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { claimDue } from '../../src/db/queries/webhook-deliveries.js';
import { DELIVERY_TIMEOUT_MS } from '../../src/webhooks/deliverer.js';
import { startDeliveryLoop } from '../../src/webhooks/loop.js';
import { createSecretBox } from '../../src/webhooks/secrets.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { auditRows, createOrganization, createRole, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';
import { createWebhook, deliveriesOf, receiverPool, testDeliverer, verified } from '../support/webhooks.js';

/**
 * README "Webhooks", delivery: Standard Webhooks signatures checked by the
 * reference implementation (standardwebhooks), at least once with the same
 * webhook-id on every retry, WEBHOOK_RETRY_SCHEDULE, failure on a redirect,
 * a timeout or a closed socket, failed after the schedule, endpoints
 * disabled after 5 days of failure, leases that survive a dead instance,
 * bounded concurrency. Real HTTP receivers on loopback.
 */
describe('webhook delivery', () => {
  let t: TestApp;
  let org: TestOrganization;
  const receivers = receiverPool();
  const receiver = receivers.start;
  const newRole = (slug = `r-${crypto.randomUUID().slice(0, 8)}`) =>
    createRole(t, org.owner, { name: slug, permissions: ['roles:read'] });

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOK_RETRY_SCHEDULE: '5,60', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
    const owner = await signedInUser(t);
    org = await createOrganization(t, owner);
  });
  afterEach(async () => {
    // Each test starts with no endpoint left from another.
    const listed = await expectStatus<{ id: string }[]>(await call(t, '/api/webhooks', { jar: org.owner.jar }), 200);
    for (const { id } of listed) await call(t, `/api/webhooks/${id}`, { method: 'DELETE', jar: org.owner.jar });
    await receivers.closeAll();
    // Each test starts at the real time (the receivers' signature check reads it too).
    t.clock.set(Date.now());
  });
  afterAll(() => t?.close());

  it('delivers an event signed per Standard Webhooks, with the audit entry as its data', async () => {
    const hook = await receiver();
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    const role = await newRole();
    const run = await testDeliverer(t).deliverDue();
    expect(run).toEqual({ attempted: 1, succeeded: 1 });

    expect(hook.received).toHaveLength(1);
    const [delivery] = hook.received;
    expect(delivery!.headers['content-type']).toBe('application/json');
    const event = verified(webhook.secret, delivery!);
    const [entry] = await auditRows(t, org.id, 'role.created');
    expect(event).toEqual({
      type: 'role.created',
      timestamp: entry!.created_at.toISOString(),
      data: {
        id: entry!.id,
        action: 'role.created',
        actorId: org.owner.id,
        organizationId: org.id,
        metadata: entry!.metadata,
        createdAt: entry!.created_at.toISOString(),
      },
    });
    expect(event.data.metadata).toMatchObject({ roleId: role.id });
    expect(Number(delivery!.headers['webhook-timestamp'])).toBe(Math.floor(t.clock().getTime() / 1000));

    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({
      id: delivery!.headers['webhook-id'],
      eventId: entry!.id,
      eventType: 'role.created',
      status: 'succeeded',
      attempts: 1,
      lastStatusCode: 200,
      lastError: null,
      nextAttemptAt: null,
    });
    // A signature under any other secret is refused by the reference implementation.
    const other = await createWebhook(t, org.owner, { url: hook.url, events: ['role.deleted'] });
    expect(() => verified(other.secret, delivery!)).toThrow();
  });

  it('sends only the subscribed events; "*" takes every organization event but never webhook.*', async () => {
    const some = await receiver();
    const every = await receiver();
    await createWebhook(t, org.owner, { url: some.url, events: ['role.deleted'] });
    const all = await createWebhook(t, org.owner, { url: every.url, events: ['*'] });
    await newRole();
    await expectStatus(
      await call(t, `/api/webhooks/${all.id}`, { method: 'PATCH', body: { description: 'all' }, jar: org.owner.jar }),
      200,
    );
    await testDeliverer(t).deliverDue();
    expect(some.received).toHaveLength(0);
    expect(every.received.map((r) => verified(all.secret, r).type)).toEqual(['role.created']);
    expect((await auditRows(t, org.id)).map((e) => e.action)).toContain('webhook.updated');
  });

  it('retries a failure after the schedule with the same webhook-id, then succeeds', async () => {
    const hook = await receiver((index) =>
      index === 0 ? { status: 500, body: `boom ${'x'.repeat(5000)}` } : { status: 204 },
    );
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    await newRole();
    const deliverer = testDeliverer(t);
    expect(await deliverer.deliverDue()).toEqual({ attempted: 1, succeeded: 0 });
    const [failed] = await deliveriesOf(t, org.owner, webhook.id);
    expect(failed).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: 500 });
    expect(failed!.lastError).toMatch(/^HTTP 500: boom x+$/);
    expect(failed!.lastError!.length).toBeLessThanOrEqual(200);
    expect(failed!.nextAttemptAt).toBe(new Date(t.clock().getTime() + 5_000).toISOString());

    // Not before its time.
    t.clock.advance(4_000);
    expect(await deliverer.deliverDue()).toEqual({ attempted: 0, succeeded: 0 });
    t.clock.advance(1_000);
    expect(await deliverer.deliverDue()).toEqual({ attempted: 1, succeeded: 1 });

    expect(hook.received).toHaveLength(2);
    const [first, second] = hook.received;
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(verified(webhook.secret, first!)).toEqual(verified(webhook.secret, second!));
    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({ status: 'succeeded', attempts: 2, lastStatusCode: 204, lastError: null });
  });

  it('marks a delivery failed after the last retry of the schedule', async () => {
    const hook = await receiver(() => ({ status: 503 }));
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    await newRole();
    const deliverer = testDeliverer(t);
    await deliverer.deliverDue();
    t.clock.advance(5_000);
    await deliverer.deliverDue();
    const [retrying] = await deliveriesOf(t, org.owner, webhook.id);
    expect(retrying).toMatchObject({ status: 'pending', attempts: 2 });
    expect(retrying!.nextAttemptAt).toBe(new Date(t.clock().getTime() + 60_000).toISOString());
    t.clock.advance(60_000);
    await deliverer.deliverDue();
    const [failed] = await deliveriesOf(t, org.owner, webhook.id);
    expect(failed).toMatchObject({ status: 'failed', attempts: 3, lastStatusCode: 503, nextAttemptAt: null });
    t.clock.advance(24 * 60 * 60 * 1000);
    expect(await deliverer.deliverDue()).toEqual({ attempted: 0, succeeded: 0 });
    expect(hook.received).toHaveLength(3);
  });

  it('settles a delivery whose secret cannot be opened (AUTH_SECRET changed) as a failed attempt on the schedule', async () => {
    const hook = await receiver();
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    await newRole();
    // A deliverer whose AUTH_SECRET is not the one the secret was sealed under.
    const other = testDeliverer(t, { secrets: createSecretBox(`another-secret-${crypto.randomUUID()}`) });
    expect(await other.deliverDue()).toEqual({ attempted: 1, succeeded: 0 });
    expect(hook.received).toHaveLength(0);
    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: null });
    expect(record!.lastError).toMatch(/secret unreadable/);
    // Not claimed again before its retry is due (no lease loop).
    t.clock.advance(4_000);
    expect(await other.deliverDue()).toEqual({ attempted: 0, succeeded: 0 });
    t.clock.advance(1_000);
    expect(await testDeliverer(t).deliverDue()).toEqual({ attempted: 1, succeeded: 1 });
    expect(verified(webhook.secret, hook.received[0]!).type).toBe('role.created');
  });

  it('does not follow a redirect: the 3xx is the failure', async () => {
    const target = await receiver();
    const hook = await receiver(() => ({ status: 307, headers: { location: target.url } }));
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    await newRole();
    await testDeliverer(t).deliverDue();
    expect(target.received).toHaveLength(0);
    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: 307 });
  });

  it('fails an attempt whose receiver closes the socket, or does not answer in time', async () => {
    expect(DELIVERY_TIMEOUT_MS).toBe(10_000);
    const closing = await receiver(() => 'close');
    const hanging = await receiver(() => 'hang');
    const closed = await createWebhook(t, org.owner, { url: closing.url, events: ['role.created'] });
    const slow = await createWebhook(t, org.owner, { url: hanging.url, events: ['role.created'] });
    await newRole();
    // The timeout shortened from 10 s, the only change from the service's deliverer.
    await testDeliverer(t, { timeoutMs: 300 }).deliverDue();
    const [reset] = await deliveriesOf(t, org.owner, closed.id);
    expect(reset).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: null });
    expect(reset!.lastError).toMatch(/fetch failed|socket|closed/i);
    const [timedOut] = await deliveriesOf(t, org.owner, slow.id);
    expect(timedOut).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: null });
    expect(timedOut!.lastError).toMatch(/TimeoutError/);
  });

  it('disables an endpoint whose deliveries have all failed for 5 days, and fails what it had pending', async () => {
    const hook = await receiver(() => ({ status: 500 }));
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    const deliverer = testDeliverer(t, { retrySchedule: [60, 60, 60] });
    const start = t.clock().getTime();
    await newRole();
    await deliverer.deliverDue();
    t.clock.set(start + 5 * 24 * 60 * 60 * 1000 - 60_000);
    await newRole();
    await deliverer.deliverDue();
    let [listed] = await expectStatus(await call(t, '/api/webhooks', { jar: org.owner.jar }), 200);
    expect(listed).toMatchObject({ enabled: true, disabledReason: null });
    t.clock.set(start + 5 * 24 * 60 * 60 * 1000);
    await deliverer.deliverDue();
    [listed] = await expectStatus(await call(t, '/api/webhooks', { jar: org.owner.jar }), 200);
    expect(listed).toMatchObject({ id: webhook.id, enabled: false });
    expect(listed.disabledReason).toMatch(/5 days/);
    const records = await deliveriesOf(t, org.owner, webhook.id);
    expect(records.map((r) => r.status)).toEqual(['failed', 'failed']);
    // Nothing more is sent, and new events are not queued for it.
    await newRole();
    t.clock.advance(60 * 60 * 1000);
    expect(await deliverer.deliverDue()).toEqual({ attempted: 0, succeeded: 0 });
    expect(await deliveriesOf(t, org.owner, webhook.id)).toHaveLength(2);
    // Enabled again, with a clean slate.
    const enabled = await expectStatus(
      await call(t, `/api/webhooks/${webhook.id}`, { method: 'PATCH', body: { enabled: true }, jar: org.owner.jar }),
      200,
    );
    expect(enabled).toMatchObject({ enabled: true, disabledReason: null });
  });

  it('sends a delivery again when the instance that claimed it died mid-send (the lease expires)', async () => {
    const hook = await receiver();
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    await newRole();
    // An instance claims it and is never heard of again.
    const now = t.clock();
    const [claimed] = await claimDue(t.db, { now, leaseUntil: new Date(now.getTime() + 30_000), limit: 10 });
    expect(claimed).toBeDefined();
    const deliverer = testDeliverer(t);
    expect(await deliverer.deliverDue()).toEqual({ attempted: 0, succeeded: 0 });
    t.clock.advance(30_000);
    expect(await deliverer.deliverDue()).toEqual({ attempted: 1, succeeded: 1 });
    expect(hook.received.map((r) => r.headers['webhook-id'])).toEqual([claimed!.id]);
    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it('sends each delivery once with two deliverers at work, and never more than `concurrency` at a time', async () => {
    const hook = await receiver(async () => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return { status: 200 };
    });
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    for (let i = 0; i < 12; i += 1) await newRole();
    const runs = await Promise.all([
      testDeliverer(t, { concurrency: 2 }).deliverDue(),
      testDeliverer(t, { concurrency: 2 }).deliverDue(),
    ]);
    expect(runs[0]!.attempted + runs[1]!.attempted).toBe(12);
    const ids = hook.received.map((r) => r.headers['webhook-id']);
    expect(new Set(ids).size).toBe(12);
    expect(ids).toHaveLength(12);
    expect(hook.inFlight.max).toBeLessThanOrEqual(4);
    const records = await deliveriesOf(t, org.owner, webhook.id);
    expect(records.every((r) => r.status === 'succeeded' && r.attempts === 1)).toBe(true);
  });

  it('sends a backlog `concurrency` at a time, not one by one', async () => {
    const hook = await receiver(async () => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      return { status: 200 };
    });
    await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    for (let i = 0; i < 12; i += 1) await newRole();
    expect(await testDeliverer(t, { concurrency: 4 }).deliverDue()).toEqual({ attempted: 12, succeeded: 12 });
    // The receiver held four at once: the deliverer fills its slots from the backlog.
    expect(hook.inFlight.max).toBe(4);
  });

  it('a Node instance delivers at commit, woken by the database notification, and stops cleanly', async () => {
    const hook = await receiver();
    await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    const loop = await startDeliveryLoop({
      deliverer: testDeliverer(t),
      database: t.database,
      logger: t.logger,
      // The timer alone would take an hour: what arrives is the notification's doing.
      intervalMs: 60 * 60 * 1000,
    });
    try {
      await newRole();
      const deadline = Date.now() + 5_000;
      while (hook.received.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(hook.received).toHaveLength(1);
    } finally {
      await loop.stop();
    }
    // Stopped: nothing more is claimed.
    await newRole();
    await new Promise((r) => setTimeout(r, 200));
    expect(hook.received).toHaveLength(1);
    await testDeliverer(t).deliverDue();
    expect(hook.received).toHaveLength(2);
  });

  it('an instance stopping mid-send gives the delivery back, due at once', async () => {
    const hook = await receiver((index) => (index === 0 ? 'hang' : { status: 200 }));
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['role.created'] });
    await newRole();
    const deliverer = testDeliverer(t);
    const run = deliverer.deliverDue();
    while (hook.received.length === 0) await new Promise((r) => setTimeout(r, 10));
    deliverer.stop();
    await run;
    const [record] = await deliveriesOf(t, org.owner, webhook.id);
    expect(record).toMatchObject({ status: 'pending', attempts: 1 });
    expect(record!.lastError).toMatch(/stopping/);
    expect(await testDeliverer(t).deliverDue()).toEqual({ attempted: 1, succeeded: 1 });
  });

  it('writes no delivery for a change that rolled back after its audit entry', async () => {
    const hook = await receiver();
    const webhook = await createWebhook(t, org.owner, { url: hook.url, events: ['*'] });
    // A fault after the audit write: the statement after recordAudit in a
    // real route fails (a trigger refuses the API key's revocation that
    // follows member.removed in the member's removal).
    const member = await signedInUser(t);
    const { addMember } = await import('../support/orgs.js');
    const memberId = await addMember(t, org, member, 'admin');
    await expectStatus(
      await call(t, '/api/api-keys', { body: { name: 'doomed', scopes: ['roles:read'] }, jar: member.jar }),
      201,
    );
    await testDeliverer(t).deliverDue();
    const before = hook.received.length;
    await t.database.withOwner(async (owner) => {
      await sql`
        CREATE FUNCTION refuse_revocation() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'injected fault'; END $$
      `.execute(owner);
      await sql`CREATE TRIGGER refuse_revocation BEFORE UPDATE ON api_keys FOR EACH ROW EXECUTE FUNCTION refuse_revocation()`.execute(
        owner,
      );
    });
    try {
      const response = await call(t, '/api/auth/organization/remove-member', {
        body: { memberIdOrEmail: memberId, organizationId: org.id },
        jar: org.owner.jar,
      });
      expect(response.status).toBeGreaterThanOrEqual(500);
    } finally {
      await t.database.withOwner(async (owner) => {
        await sql`DROP TRIGGER refuse_revocation ON api_keys`.execute(owner);
        await sql`DROP FUNCTION refuse_revocation()`.execute(owner);
      });
    }
    expect(await auditRows(t, org.id, 'member.removed')).toEqual([]);
    await testDeliverer(t).deliverDue();
    expect(hook.received).toHaveLength(before);
    const types = (await deliveriesOf(t, org.owner, webhook.id)).map((d) => d.eventType);
    expect(types).not.toContain('member.removed');
    // The same removal, committed, has its event.
    await expectStatus(
      await call(t, '/api/auth/organization/remove-member', {
        body: { memberIdOrEmail: memberId, organizationId: org.id },
        jar: org.owner.jar,
      }),
      200,
    );
    await testDeliverer(t).deliverDue();
    const events = hook.received.slice(before).map((r) => verified(webhook.secret, r));
    expect(events.map((e) => e.type).sort()).toEqual(['api_key.revoked', 'member.removed']);
    expect(events.find((e) => e.type === 'member.removed')!.data.metadata).toMatchObject({
      userId: member.id,
      memberId,
      reason: 'removed',
    });
  });
});
