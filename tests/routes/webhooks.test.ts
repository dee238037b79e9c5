import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectError, expectStatus, UUID_V4 } from '../support/http.js';
import { auditRows, createOrganization, newMember, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';
import { createWebhook, deliveriesOf, startReceiver, testDeliverer, verified } from '../support/webhooks.js';

/**
 * README "Webhooks", the management routes: create (the secret shown once),
 * list (never the secret), update, delete, rotate, test, deliveries; the
 * contract's validation (catalog names or ["*"], URLs: no private, loopback,
 * link-local, shared or unique-local address in any spelling; only the
 * allowed ports); audited as webhook.*; organizations:write to manage,
 * organizations:read to read; another organization's endpoint is a 404; at
 * most WEBHOOK_MAX_ENDPOINTS per organization; an API key never creates an
 * endpoint or rotates its secret.
 */
const SECRET = /^whsec_[A-Za-z0-9+/]{32}$/;

describe('webhook endpoints', () => {
  let t: TestApp;
  let org: TestOrganization;

  beforeAll(async () => {
    t = await createTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'false' } });
    org = await createOrganization(t, await signedInUser(t));
  });
  afterAll(() => t?.close());

  const post = (body: unknown, jar = org.owner.jar) => call(t, '/api/webhooks', { body, jar });

  it('creates an endpoint and shows its secret once; the list never has it', async () => {
    const created = await expectStatus(
      await post({ url: 'https://hooks.example.com/in', events: ['member.added', 'role.created'], description: 'CRM' }),
      201,
    );
    expect(Object.keys(created).sort()).toEqual(
      ['createdAt', 'description', 'enabled', 'events', 'id', 'secret', 'url'].sort(),
    );
    expect(created).toMatchObject({
      url: 'https://hooks.example.com/in',
      events: ['member.added', 'role.created'],
      description: 'CRM',
      enabled: true,
    });
    expect(created.id).toMatch(UUID_V4);
    expect(created.secret).toMatch(SECRET);
    expect(new Date(created.createdAt).toISOString()).toBe(created.createdAt);

    const listed = await expectStatus(await call(t, '/api/webhooks', { jar: org.owner.jar }), 200);
    const mine = listed.find((w: { id: string }) => w.id === created.id);
    expect(mine).toEqual({
      id: created.id,
      url: created.url,
      events: created.events,
      description: 'CRM',
      enabled: true,
      createdAt: created.createdAt,
      disabledReason: null,
    });
    expect(JSON.stringify(listed)).not.toContain(created.secret.slice('whsec_'.length));

    // The URL is echoed as sent (not normalised by the parser that checks it).
    const bare = await expectStatus(await post({ url: 'https://Hooks.Example.com', events: ['*'] }), 201);
    expect(bare.url).toBe('https://Hooks.Example.com');

    const [entry] = (await auditRows(t, org.id, 'webhook.created')).filter((e) => e.metadata.webhookId === created.id);
    expect(entry!.metadata).toMatchObject({ webhookId: created.id, url: created.url });
    expect(JSON.stringify(entry)).not.toContain(created.secret.slice('whsec_'.length));
  });

  it('refuses what the contract refuses, with VALIDATION_ERROR naming the field', async () => {
    const url = 'https://hooks.example.com/in';
    const refusals: [unknown, string][] = [
      [{ url, events: [] }, 'events'],
      [{ url, events: ['role.created', 'role.created'] }, 'events'],
      [{ url, events: ['nope.nothing'] }, 'events.0'],
      [{ url, events: ['webhook.created'] }, 'events.0'],
      [{ url, events: ['user.role_changed'] }, 'events.0'],
      [{ url, events: ['*', 'role.created'] }, 'events'],
      [{ url, events: 'role.created' }, 'events'],
      [{ url, events: ['*'], description: 'x'.repeat(201) }, 'description'],
      [{ url, events: ['*'], secret: 'whsec_mine' }, ''],
      [{ events: ['*'] }, 'url'],
      [{ url: 'not a url', events: ['*'] }, 'url'],
      [{ url: 'ftp://hooks.example.com/', events: ['*'] }, 'url'],
      [{ url: 'https://user:pass@hooks.example.com/', events: ['*'] }, 'url'],
    ];
    for (const [body, path] of refusals) {
      const error = await expectError(await post(body), 400, 'VALIDATION_ERROR');
      expect(
        error.details?.some((d) => d.path === path || (path === '' && d.path !== undefined)),
        JSON.stringify([body, error]),
      ).toBe(true);
    }
  });

  it('refuses private, loopback, link-local, shared and unique-local targets in any spelling', async () => {
    const targets = [
      'http://127.0.0.1/x',
      'http://127.1/x',
      'http://2130706433/x',
      'http://0x7f000001/x',
      'http://017700000001/x',
      'http://0.0.0.0/x',
      'http://10.0.0.1/x',
      'http://172.16.5.4/x',
      'http://192.168.1.1/x',
      'http://100.64.0.1/x',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]/x',
      'http://[::]/x',
      'http://[::ffff:127.0.0.1]/x',
      'http://[::ffff:a9fe:a9fe]/x',
      'http://[fe80::1]/x',
      'http://[fd12:3456::1]/x',
      'http://localhost:4000/x',
      'http://api.localhost/x',
    ];
    for (const url of targets) {
      const error = await expectError(await post({ url, events: ['*'] }), 400, 'VALIDATION_ERROR');
      expect(error.details, url).toEqual([{ path: 'url', message: expect.stringMatching(/private/) }]);
    }
    // The same check on a change of URL.
    const created = await expectStatus(await post({ url: 'https://93.184.215.14/hook', events: ['*'] }), 201);
    await expectError(
      await call(t, `/api/webhooks/${created.id}`, {
        method: 'PATCH',
        body: { url: 'http://10.1.1.1/' },
        jar: org.owner.jar,
      }),
      400,
      'VALIDATION_ERROR',
    );
  });

  it('updates, rotates (the old secret signs nothing more) and deletes, each audited', async () => {
    const receiver = await startReceiver();
    try {
      // Loopback allowed (the receiver is a local server), on a database of its own (its deliverer sends all that is due).
      const local = await createTestApp({ env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
      const org = await createOrganization(local, await signedInUser(local));
      const created = await createWebhook(local, org.owner, { url: receiver.url, events: ['role.created'] });
      const patched = await expectStatus(
        await call(local, `/api/webhooks/${created.id}`, {
          method: 'PATCH',
          body: { events: ['*'], description: null },
          jar: org.owner.jar,
        }),
        200,
      );
      expect(patched).toMatchObject({ id: created.id, events: ['*'], description: null, disabledReason: null });
      await expectError(
        await call(local, `/api/webhooks/${created.id}`, { method: 'PATCH', body: {}, jar: org.owner.jar }),
        400,
        'VALIDATION_ERROR',
      );

      const rotated = await expectStatus(
        await call(local, `/api/webhooks/${created.id}/rotate-secret`, { method: 'POST', jar: org.owner.jar }),
        200,
      );
      expect(Object.keys(rotated).sort()).toEqual(['id', 'secret']);
      expect(rotated.id).toBe(created.id);
      expect(rotated.secret).toMatch(SECRET);
      expect(rotated.secret).not.toBe(created.secret);

      const test = await expectStatus(
        await call(local, `/api/webhooks/${created.id}/test`, { method: 'POST', jar: org.owner.jar }),
        202,
      );
      expect(test.deliveryId).toMatch(UUID_V4);
      await testDeliverer(local).deliverDue();
      const delivery = receiver.received.find((r) => r.headers['webhook-id'] === test.deliveryId)!;
      expect(verified(rotated.secret, delivery)).toMatchObject({
        type: 'webhook.test',
        data: { action: 'webhook.test', organizationId: org.id, actorId: org.owner.id },
      });
      expect(() => verified(created.secret, delivery)).toThrow();

      const deleted = await expectStatus(
        await call(local, `/api/webhooks/${created.id}`, { method: 'DELETE', jar: org.owner.jar }),
        200,
      );
      expect(deleted).toEqual({ id: created.id, deleted: true });
      for (const [method, path] of [
        ['DELETE', ''],
        ['PATCH', ''],
        ['POST', '/rotate-secret'],
        ['POST', '/test'],
        ['GET', '/deliveries'],
      ] as const) {
        await expectError(
          await call(local, `/api/webhooks/${created.id}${path}`, {
            method,
            ...(method === 'PATCH' ? { body: { enabled: false } } : {}),
            jar: org.owner.jar,
          }),
          404,
          'NOT_FOUND',
        );
      }
      const actions = (await auditRows(local, org.id))
        .filter((e) => e.metadata.webhookId === created.id)
        .map((e) => e.action);
      expect(actions).toEqual(['webhook.created', 'webhook.updated', 'webhook.secret_rotated', 'webhook.deleted']);
      await local.close();
    } finally {
      await receiver.close();
    }
  });

  it('lists deliveries newest first with the shared cursor paging', async () => {
    const created = await expectStatus(await post({ url: 'https://93.184.215.14/hook', events: ['*'] }), 201);
    const ids: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const queued = await expectStatus(
        await call(t, `/api/webhooks/${created.id}/test`, { method: 'POST', jar: org.owner.jar }),
        202,
      );
      ids.push(queued.deliveryId);
    }
    const first = await expectStatus(
      await call(t, `/api/webhooks/${created.id}/deliveries?limit=2`, { jar: org.owner.jar }),
      200,
    );
    expect(first.items.map((d: { id: string }) => d.id)).toEqual([ids[2], ids[1]]);
    expect(first.items[0]).toMatchObject({
      eventType: 'webhook.test',
      status: 'pending',
      attempts: 0,
      lastStatusCode: null,
      lastError: null,
    });
    expect(first.items[0].nextAttemptAt).toBe(first.items[0].createdAt);
    const second = await expectStatus(
      await call(t, `/api/webhooks/${created.id}/deliveries?limit=2&cursor=${first.nextCursor}`, {
        jar: org.owner.jar,
      }),
      200,
    );
    expect(second.items.map((d: { id: string }) => d.id)).toEqual([ids[0]]);
    expect(second.nextCursor).toBeNull();
    await expectError(
      await call(t, `/api/webhooks/${created.id}/deliveries?limit=0`, { jar: org.owner.jar }),
      400,
      'VALIDATION_ERROR',
    );
    await expectError(
      await call(t, `/api/webhooks/${created.id}/deliveries?cursor=junk`, { jar: org.owner.jar }),
      400,
      'VALIDATION_ERROR',
    );
    await expectError(
      await call(t, '/api/webhooks/not-a-uuid/deliveries', { jar: org.owner.jar }),
      400,
      'VALIDATION_ERROR',
    );
  });

  it('is managed with organizations:write, read with organizations:read, and never across organizations', async () => {
    const created = await expectStatus(await post({ url: 'https://93.184.215.14/hook', events: ['*'] }), 201);
    const viewer = await newMember(t, org, 'viewer');
    expect((await call(t, '/api/webhooks', { jar: viewer.jar })).status).toBe(200);
    expect((await call(t, `/api/webhooks/${created.id}/deliveries`, { jar: viewer.jar })).status).toBe(200);
    await expectError(
      await post({ url: 'https://93.184.215.14/x', events: ['*'] }, viewer.jar),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );
    await expectError(
      await call(t, `/api/webhooks/${created.id}/rotate-secret`, { method: 'POST', jar: viewer.jar }),
      403,
      'INSUFFICIENT_PERMISSIONS',
    );

    const other = await createOrganization(t, await signedInUser(t));
    const theirs = await expectStatus(await call(t, '/api/webhooks', { jar: other.owner.jar }), 200);
    expect(theirs).toEqual([]);
    for (const [method, path] of [
      ['GET', '/deliveries'],
      ['PATCH', ''],
      ['DELETE', ''],
      ['POST', '/rotate-secret'],
      ['POST', '/test'],
    ] as const) {
      await expectError(
        await call(t, `/api/webhooks/${created.id}${path}`, {
          method,
          ...(method === 'PATCH' ? { body: { description: 'mine now' } } : {}),
          jar: other.owner.jar,
        }),
        404,
        'NOT_FOUND',
      );
    }
    // Events of the other organization never reach this one's endpoints.
    await call(t, '/api/roles', { body: { name: 'Theirs', permissions: ['roles:read'] }, jar: other.owner.jar });
    const types = (await deliveriesOf(t, org.owner, created.id)).map((d) => d.eventType);
    expect(types).not.toContain('role.created');
  });

  it('refuses the body-less POSTs (rotate-secret, test) from a foreign origin with the cookie: nothing rotated or queued', async () => {
    const created = await expectStatus(await post({ url: 'https://93.184.215.14/hook', events: ['*'] }), 201);
    for (const action of ['rotate-secret', 'test']) {
      const refused = await call(t, `/api/webhooks/${created.id}/${action}`, {
        method: 'POST',
        jar: org.owner.jar,
        headers: { origin: 'https://evil.example' },
      });
      expect(refused.status, action).toBe(403);
      expect(await refused.json()).toMatchObject({ code: 'FORBIDDEN' });
    }
    expect(await deliveriesOf(t, org.owner, created.id)).toEqual([]);
    const rotations = (await auditRows(t, org.id, 'webhook.secret_rotated')).filter(
      (e) => e.metadata.webhookId === created.id,
    );
    expect(rotations).toEqual([]);
  });

  it('takes only ports 443 and 80 outside production; WEBHOOK_ALLOWED_PORTS replaces the list', async () => {
    for (const url of ['https://93.184.215.14/p', 'https://93.184.215.14:443/p', 'http://93.184.215.14:80/p'])
      await expectStatus(await post({ url, events: ['*'] }), 201);
    for (const url of [
      'https://93.184.215.14:8443/p',
      'http://hooks.example.com:8080/p',
      'https://93.184.215.14:22/',
    ]) {
      const error = await expectError(await post({ url, events: ['*'] }), 400, 'VALIDATION_ERROR');
      expect(error.details, url).toEqual([{ path: 'url', message: 'port must be one of 443, 80' }]);
    }
    const listed = await createTestApp({
      database: t.database,
      clock: t.clock,
      env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_ALLOWED_PORTS: '8443' },
    });
    try {
      const own = await createOrganization(listed, await signedInUser(listed));
      const created = await expectStatus(
        await call(listed, '/api/webhooks', {
          body: { url: 'https://93.184.215.14:8443/p', events: ['*'] },
          jar: own.owner.jar,
        }),
        201,
      );
      const refused = await expectError(
        await call(listed, '/api/webhooks', {
          body: { url: 'https://93.184.215.14/p', events: ['*'] },
          jar: own.owner.jar,
        }),
        400,
        'VALIDATION_ERROR',
      );
      expect(refused.details).toEqual([{ path: 'url', message: 'port must be one of 8443' }]);
      // The same rule on a change of URL.
      await expectError(
        await call(listed, `/api/webhooks/${created.id}`, {
          method: 'PATCH',
          body: { url: 'https://93.184.215.14:9000/p' },
          jar: own.owner.jar,
        }),
        400,
        'VALIDATION_ERROR',
      );
    } finally {
      await listed.close();
    }
  });

  it('keeps an organization to WEBHOOK_MAX_ENDPOINTS endpoints, also when creations race (409 QUOTA_EXCEEDED)', async () => {
    const limited = await createTestApp({
      database: t.database,
      clock: t.clock,
      env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_MAX_ENDPOINTS: '3' },
    });
    try {
      const own = await createOrganization(limited, await signedInUser(limited));
      const create = (n: number) =>
        call(limited, '/api/webhooks', {
          body: { url: `https://93.184.215.14/q${n}`, events: ['*'] },
          jar: own.owner.jar,
        });
      const count = async () =>
        (await expectStatus<unknown[]>(await call(limited, '/api/webhooks', { jar: own.owner.jar }), 200)).length;
      // Five at once on an empty organization: three are created, two refused.
      const burst = await Promise.all([1, 2, 3, 4, 5].map(create));
      expect(burst.map((r) => r.status).sort()).toEqual([201, 201, 201, 409, 409]);
      for (const refused of burst.filter((r) => r.status === 409))
        expect(await refused.json()).toEqual({ code: 'QUOTA_EXCEEDED', message: 'Quota exceeded' });
      expect(await count()).toBe(3);
      // One deleted: two racing for the one free place, one wins.
      const [first] = await expectStatus<{ id: string }[]>(
        await call(limited, '/api/webhooks', { jar: own.owner.jar }),
        200,
      );
      await expectStatus(
        await call(limited, `/api/webhooks/${first!.id}`, { method: 'DELETE', jar: own.owner.jar }),
        200,
      );
      const race = await Promise.all([create(6), create(7)]);
      expect(race.map((r) => r.status).sort()).toEqual([201, 409]);
      expect(await count()).toBe(3);
      // Nothing was audited for a refusal.
      const created = await auditRows(limited, own.id, 'webhook.created');
      expect(created).toHaveLength(4);
      // The limit is the organization's: another one creates its own.
      const other = await createOrganization(limited, await signedInUser(limited));
      await expectStatus(
        await call(limited, '/api/webhooks', {
          body: { url: 'https://93.184.215.14/r', events: ['*'] },
          jar: other.owner.jar,
        }),
        201,
      );
    } finally {
      await limited.close();
    }
  });

  it('never lets an API key create an endpoint or rotate a secret (403 FORBIDDEN), nothing created or rotated', async () => {
    const keyed = await createTestApp({
      database: t.database,
      clock: t.clock,
      env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'false', API_KEY_AUTH: 'enabled' },
    });
    try {
      const own = await createOrganization(keyed, await signedInUser(keyed));
      const created = await createWebhook(keyed, own.owner, { url: 'https://93.184.215.14/k', events: ['*'] });
      const key = await expectStatus<{ key: string }>(
        await call(keyed, '/api/api-keys', {
          body: { name: 'hooks', scopes: ['organizations:read', 'organizations:write'] },
          jar: own.owner.jar,
        }),
        201,
      );
      const bearer = { authorization: `Bearer ${key.key}` };
      // The key works on the routes that hand out no secret.
      expect((await call(keyed, '/api/webhooks', { headers: bearer })).status).toBe(200);
      await expectStatus(
        await call(keyed, `/api/webhooks/${created.id}`, {
          method: 'PATCH',
          body: { description: 'by key' },
          headers: bearer,
        }),
        200,
      );
      await expectError(
        await call(keyed, '/api/webhooks', {
          body: { url: 'https://93.184.215.14/k2', events: ['*'] },
          headers: bearer,
        }),
        403,
        'FORBIDDEN',
      );
      await expectError(
        await call(keyed, `/api/webhooks/${created.id}/rotate-secret`, { method: 'POST', headers: bearer }),
        403,
        'FORBIDDEN',
      );
      // Nor does it point the stream (signed with the kept secret) somewhere else.
      await expectError(
        await call(keyed, `/api/webhooks/${created.id}`, {
          method: 'PATCH',
          body: { url: 'https://93.184.215.15/elsewhere' },
          headers: bearer,
        }),
        403,
        'FORBIDDEN',
      );
      const listed = await expectStatus<{ url: string }[]>(
        await call(keyed, '/api/webhooks', { jar: own.owner.jar }),
        200,
      );
      expect(listed).toHaveLength(1);
      expect(listed[0]!.url).toBe('https://93.184.215.14/k');
      expect(await auditRows(keyed, own.id, 'webhook.secret_rotated')).toEqual([]);
    } finally {
      await keyed.close();
    }
  });

  it('makes member.added (an invitation accepted) and member.removed (removed or left) audit actions and events', async () => {
    const joined = await newMember(t, org, 'admin');
    const [added] = (await auditRows(t, org.id, 'member.added')).filter((e) => e.metadata.userId === joined.id);
    expect(added).toMatchObject({
      actor_id: joined.id,
      metadata: { memberId: joined.memberId, userId: joined.id, roleSlug: 'admin' },
    });
    await expectStatus(
      await call(t, '/api/auth/organization/leave', { body: { organizationId: org.id }, jar: joined.jar }),
      200,
    );
    const [left] = (await auditRows(t, org.id, 'member.removed')).filter((e) => e.metadata.userId === joined.id);
    expect(left).toMatchObject({ actor_id: joined.id, metadata: { userId: joined.id, reason: 'left' } });
  });
});
