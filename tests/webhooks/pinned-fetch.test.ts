import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pinnedFetch } from '../../src/webhooks/pinned-fetch.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { createOrganization, type TestOrganization } from '../support/orgs.js';
import { signedInUser } from '../support/users.js';
import {
  createWebhook,
  deliveriesOf,
  type Receiver,
  receiverPool,
  startReceiver,
  testDeliverer,
} from '../support/webhooks.js';

/**
 * The Node deliverer's transport (src/webhooks/pinned-fetch.ts): the socket
 * connects to an address its own lookup checked, so a host name that answers
 * a public address to the URL check and a private one when the connection is
 * made (DNS rebinding) reaches nothing. Real HTTP receivers on loopback; the
 * names are resolved by the test's resolver, as server.ts passes dns.lookup.
 */
describe('pinned webhook transport (Node)', () => {
  let t: TestApp;
  let org: TestOrganization;
  /** The receiver the rebinding test's endpoint names: its port is the app's one allowed port. */
  let target: Receiver;
  const receivers = receiverPool();
  const receiver = receivers.start;
  /** The receiver's URL under a host name instead of its address. */
  const named = (hook: Receiver, host: string) => hook.url.replace('127.0.0.1', host);
  const post = (body = '{"type":"test"}') => ({
    method: 'POST' as const,
    headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' },
    body,
    signal: AbortSignal.timeout(5000),
  });

  beforeAll(async () => {
    target = await startReceiver();
    t = await createTestApp({
      env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_ALLOWED_PORTS: new URL(target.url).port },
    });
    org = await createOrganization(t, await signedInUser(t));
  });
  afterEach(async () => {
    await receivers.closeAll();
  });
  afterAll(async () => {
    await target?.close();
    await t?.close();
  });

  it('sends the POST to the address its lookup answered: status, headers and body as fetch gives them, no redirect followed', async () => {
    const hook = await receiver(
      (index) =>
        [
          { status: 500, body: 'boom' },
          { status: 204 },
          { status: 302, headers: { location: 'http://127.0.0.1:1/elsewhere' } },
        ][index]!,
    );
    const lookups: string[] = [];
    const send = pinnedFetch({
      resolve: async (host) => {
        lookups.push(host);
        return ['127.0.0.1'];
      },
      allowPrivate: true,
    });
    const url = new URL(named(hook, 'receiver.test.example'));

    const failed = await send(url, post('{"n":1}'));
    expect(failed.status).toBe(500);
    expect(await failed.text()).toBe('boom');
    const empty = await send(url, post());
    expect(empty.status).toBe(204);
    const moved = await send(url, post());
    expect(moved.status).toBe(302);
    expect(moved.headers.get('location')).toBe('http://127.0.0.1:1/elsewhere');

    // One connection, kept alive: its address was checked when it was made.
    expect(lookups).toEqual(['receiver.test.example']);
    expect(hook.received).toHaveLength(3);
    expect(hook.received[0]!.body).toBe('{"n":1}');
    expect(hook.received[0]!.headers).toMatchObject({
      'content-type': 'application/json',
      'webhook-id': 'msg_1',
      'content-length': '7',
      host: `receiver.test.example:${url.port}`,
    });
  });

  it('sends a GET without a body or Content-Length (identity providers: discovery, keys)', async () => {
    const hook = await receiver(() => ({ status: 200, body: '{"keys":[]}' }));
    const send = pinnedFetch({ resolve: async () => ['127.0.0.1'], allowPrivate: true });
    const answer = await send(new URL(named(hook, 'idp.test.example')), {
      method: 'GET',
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(5000),
    });
    expect(await answer.text()).toBe('{"keys":[]}');
    expect(hook.received).toHaveLength(1);
    expect(hook.received[0]!.body).toBe('');
    expect(hook.received[0]!.headers['content-length']).toBeUndefined();
    expect(hook.received[0]!.headers['transfer-encoding']).toBeUndefined();
  });

  it("gives up when its signal aborts (the deliverer's timeout and shutdown)", async () => {
    const hook = await receiver(() => 'hang');
    const send = pinnedFetch({ resolve: async () => ['127.0.0.1'], allowPrivate: true });
    const aborted = send(new URL(named(hook, 'slow.test.example')), { ...post(), signal: AbortSignal.timeout(200) });
    await expect(aborted).rejects.toMatchObject({ name: 'AbortError' });
    expect(hook.received).toHaveLength(1);
  });

  it('refuses to connect where the name resolves to a private address', async () => {
    const hook = await receiver();
    const send = pinnedFetch({ resolve: async () => ['93.184.215.14', '127.0.0.1'] });
    await expect(send(new URL(named(hook, 'mixed.test.example')), post())).rejects.toThrow(
      /mixed\.test\.example resolves to a private address \(127\.0\.0\.1\)/,
    );
    const none = pinnedFetch({ resolve: async () => [] });
    await expect(none(new URL(named(hook, 'gone.test.example')), post())).rejects.toThrow(/does not resolve/);
    expect(hook.received).toEqual([]);
  });

  it('a name that answers the check with a public address and the connection with a private one (DNS rebinding) is not reached: the attempt fails', async () => {
    const hook = target;
    let answers = 0;
    const rebinding = async () => (answers++ === 0 ? ['93.184.215.14'] : ['127.0.0.1']);
    const url = named(hook, 'rebind.test.example');
    const webhook = await createWebhook(t, org.owner, { url, events: ['role.created'] });
    await expectStatus(await call(t, `/api/webhooks/${webhook.id}/test`, { method: 'POST', jar: org.owner.jar }), 202);

    const deliverer = testDeliverer(t, {
      urlPolicy: {
        httpsOnly: false,
        allowPrivate: false,
        allowedPorts: [Number(new URL(url).port)],
        resolve: rebinding,
      },
      fetch: pinnedFetch({ resolve: rebinding }),
    });
    expect(await deliverer.deliverDue()).toEqual({ attempted: 1, succeeded: 0 });
    // The check saw the public address; the connection would have gone to the private one.
    expect(answers).toBe(2);
    expect(hook.received).toEqual([]);
    const [delivery] = await deliveriesOf(t, org.owner, webhook.id);
    expect(delivery).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: null });
    expect(delivery!.lastError).toMatch(/rebind\.test\.example resolves to a private address \(127\.0\.0\.1\)/);
  });
});
