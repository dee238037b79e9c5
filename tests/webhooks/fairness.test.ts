import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { claimDue } from '../../src/db/queries/webhook-deliveries.js';
import { startDeliveryLoop } from '../../src/webhooks/loop.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus } from '../support/http.js';
import { createOrganization, createRole, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';
import { createWebhook, startReceiver, startTarpit, testDeliverer } from '../support/webhooks.js';

/**
 * Webhook fairness (docs/webhooks.md "Sending"): one organization's slow or
 * silent endpoints never hold another organization's deliveries back. An
 * organization holds at most `perOrganization` leases at once (every
 * instance counted), and a claim takes the organizations in turn.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('webhook delivery across organizations', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
  });
  afterAll(() => t?.close());

  const newRole = (org: TestOrganization) =>
    createRole(t, org.owner, { name: `r-${crypto.randomUUID().slice(0, 8)}`, permissions: ['roles:read'] });
  const removeEndpoints = async (org: TestOrganization) => {
    const listed = await expectStatus<{ id: string }[]>(await call(t, '/api/webhooks', { jar: org.owner.jar }), 200);
    for (const { id } of listed) await call(t, `/api/webhooks/${id}`, { method: 'DELETE', jar: org.owner.jar });
  };

  it('claims the organizations in turn, at most `perOrganization` leases each, counting those other instances hold', async () => {
    const receiver = await startReceiver();
    const [busy, quiet, third] = await Promise.all(
      [1, 2, 3].map(async () => createOrganization(t, await signedInUser(t))),
    );
    try {
      for (const org of [busy!, quiet!, third!])
        await createWebhook(t, org.owner, { url: receiver.url, events: ['role.created'] });
      // The busy organization's six events are all older than the others' one each.
      for (let i = 0; i < 6; i += 1) await newRole(busy!);
      await newRole(quiet!);
      await newRole(third!);
      const tenants = (rows: { tenant_id: string }[]) =>
        rows
          .map((row) => (row.tenant_id === busy!.id ? 'busy' : row.tenant_id === quiet!.id ? 'quiet' : 'third'))
          .sort();
      const claim = (limit: number) => {
        const now = t.clock();
        return claimDue(t.db, { now, leaseUntil: new Date(now.getTime() + 30_000), limit, perOrganization: 2 });
      };

      // Two places: the busy organization's oldest and the next organization's, not the busy one's second.
      expect(tenants(await claim(2))).toEqual(['busy', 'quiet']);
      // Another instance: one more of the busy organization (its second lease), and the third organization's.
      expect(tenants(await claim(10))).toEqual(['busy', 'third']);
      // The busy organization holds two leases: nothing more of it, however much room there is.
      expect(await claim(10)).toEqual([]);
      // Once its leases have run out, its deliveries come again, two at a time.
      t.clock.advance(30_000);
      expect(tenants(await claim(10))).toEqual(['busy', 'busy', 'quiet', 'third']);
    } finally {
      for (const org of [busy!, quiet!, third!]) await removeEndpoints(org);
      await receiver.close();
      t.clock.set(Date.now());
    }
  });

  it("one organization's silent endpoints (the most it may have, a backlog on each) never hold back another organization's delivery", async () => {
    const silent = await startTarpit();
    const receiver = await startReceiver();
    const noisy = await createOrganization(t, await signedInUser(t));
    const other = await createOrganization(t, await signedInUser(t));
    const { maxEndpoints } = t.config.webhooks;
    const loop = await startDeliveryLoop({ deliverer: testDeliverer(t), database: t.database, logger: t.logger });
    try {
      for (let i = 0; i < maxEndpoints; i += 1)
        await createWebhook(t, noisy.owner, { url: `${silent.origin}/hook-${i}`, events: ['role.created'] });
      await expectError(
        await call(t, '/api/webhooks', {
          body: { url: `${silent.origin}/one-more`, events: ['role.created'] },
          jar: noisy.owner.jar,
        }),
        409,
        'QUOTA_EXCEEDED',
      );
      // A backlog: five events for each of its endpoints, every send held by the tarpit until its 10 s timeout.
      for (let i = 0; i < 5; i += 1) await newRole(noisy);
      const deadline = Date.now() + 5_000;
      while (silent.connections.now < 4 && Date.now() < deadline) await sleep(10);
      expect(silent.connections.now).toBe(4);

      await createWebhook(t, other.owner, { url: receiver.url, events: ['role.created'] });
      const queued = Date.now();
      await newRole(other);
      while (receiver.received.length === 0 && Date.now() - queued < 5_000) await sleep(5);
      const waited = Date.now() - queued;
      expect(receiver.received, `the other organization waited ${waited} ms`).toHaveLength(1);
      expect(waited).toBeLessThan(5_000);
      // The silent organization never held more than its share of the slots.
      expect(silent.connections.max).toBe(4);
    } finally {
      await loop.stop();
      await removeEndpoints(noisy);
      await removeEndpoints(other);
      await silent.close();
      await receiver.close();
    }
  });
});
