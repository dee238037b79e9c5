/**
 * The session-state cache (src/auth/session-state-cache.ts): a request served
 * from the cookie cache is answered from memory, and every committed change to
 * what `session_state` reads clears it through the database's notification
 * (migrations/0005), on both engines, whoever writes.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listenForSessionStateChanges } from '../../src/auth/session.js';
import { createSessionStateCache, SESSION_STATE_CHANNEL } from '../../src/auth/session-state-cache.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';
import { call } from '../support/http.js';
import { type SignedInUser, signedInUser } from '../support/users.js';

async function sessionName(t: TestApp, user: SignedInUser): Promise<string> {
  const res = await call(t, '/api/session', { jar: user.jar });
  expect(res.status).toBe(200);
  return ((await res.json()) as { user: { name: string } }).user.name;
}

/** PostgreSQL delivers a NOTIFY on the listening connection shortly after the commit; PGlite before it resolves. */
async function cleared(t: TestApp): Promise<void> {
  for (let i = 0; i < 200 && t.sessionStateCache!.size > 0; i++)
    await new Promise((resolve) => setTimeout(resolve, 10));
  expect(t.sessionStateCache!.size).toBe(0);
}

/**
 * Resolves once every notification committed before now has reached the
 * cache: a marked one is sent and awaited (delivery follows commit order, and
 * this listener runs after the cache's, on the same connection).
 */
async function notificationsDelivered(database: TestDatabase): Promise<void> {
  const mark = crypto.randomUUID();
  let arrived!: () => void;
  const delivered = new Promise<void>((resolve) => (arrived = resolve));
  await database.listen(SESSION_STATE_CHANNEL, (payload) => payload === mark && arrived());
  await sql`select pg_notify(${SESSION_STATE_CHANNEL}, ${mark})`.execute(database.db);
  await delivered;
}

describe('session-state cache', () => {
  let t: TestApp;
  let database: TestDatabase;
  let user: SignedInUser;
  beforeAll(async () => {
    // The mechanism on both engines (the Node entry runs it on the embedded one only: src/app.ts sessionStateCacheFor).
    database = await openTestDatabase();
    t = await createTestApp({ database, sessionStateCache: await listenForSessionStateChanges(database) });
    user = await signedInUser(t, { name: 'Before' });
    // PostgreSQL delivers the set-up's notifications asynchronously: none may
    // arrive during the first test and clear what it has just filled.
    await notificationsDelivered(database);
    expect(t.sessionStateCache!.size).toBe(0);
  });
  afterAll(async () => {
    await t.close();
    await database.close();
  });

  it('answers a repeated session read from memory, and a committed change elsewhere clears it', async () => {
    expect(await sessionName(t, user)).toBe('Before');
    expect(t.sessionStateCache!.size).toBe(1);

    // A write with the notifying trigger switched off: the cache keeps answering the old state.
    await t.database.withOwner(async (owner) => {
      await owner.transaction().execute(async (trx) => {
        await sql`alter table users disable trigger users_notify_session_state`.execute(trx);
        await sql`update users set name = 'Unseen' where id = ${user.id}::uuid`.execute(trx);
        await sql`alter table users enable trigger users_notify_session_state`.execute(trx);
      });
    });
    expect(await sessionName(t, user)).toBe('Before');

    // An ordinary committed write, not through the API: the notification clears the cache.
    await t.database.withOwner((owner) =>
      sql`update users set name = 'After' where id = ${user.id}::uuid`.execute(owner),
    );
    await cleared(t);
    expect(await sessionName(t, user)).toBe('After');
  });

  it('a rolled-back write notifies nobody', async () => {
    await sessionName(t, user);
    expect(t.sessionStateCache!.size).toBe(1);
    await t.database
      .withOwner((owner) =>
        owner.transaction().execute(async (trx) => {
          await sql`update users set name = 'Rolled back' where id = ${user.id}::uuid`.execute(trx);
          throw new Error('roll back');
        }),
      )
      .catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(t.sessionStateCache!.size).toBe(1);
    expect(await sessionName(t, user)).toBe('After');
  });

  it("keeps its entries across the SPA's repeated get-session, and empties on a write through the API", async () => {
    await sessionName(t, user);
    expect(t.sessionStateCache!.size).toBe(1);
    expect((await call(t, '/api/auth/get-session', { jar: user.jar })).status).toBe(200);
    expect(t.sessionStateCache!.size).toBe(1);
    const res = await call(t, '/api/auth/update-user', { method: 'POST', jar: user.jar, body: { name: 'Renamed' } });
    expect(res.status).toBe(200);
    expect(t.sessionStateCache!.size).toBe(0);
    expect(await sessionName(t, user)).toBe('Renamed');
  });

  it('a signed-out session is refused on the next request (the sign-out clears the cache)', async () => {
    const other = await signedInUser(t);
    await sessionName(t, other);
    const copied = other.jar.header();
    const out = await call(t, '/api/auth/sign-out', { method: 'POST', jar: other.jar, body: {} });
    expect(out.status).toBe(200);
    // The copied cookies still carry a valid cookie cache; the session row is gone.
    const res = await call(t, '/api/session', { headers: { cookie: copied } });
    expect(await res.json()).toBeNull();
  });
});

describe('session-state cache rules', () => {
  it('does not keep a read that an invalidation overtook, ends entries with their session or the TTL, and holds at most maxEntries', () => {
    let now = 1_000;
    const cache = createSessionStateCache<string>({ maxEntries: 2, ttlMs: 100, now: () => now });
    const generation = cache.generation();
    cache.clear(); // a change committed while the read was in flight
    cache.set('a', 'stale', generation, now + 1_000);
    expect(cache.get('a')).toBeUndefined();

    cache.set('a', 'A', cache.generation(), now + 50); // the session ends first
    cache.set('b', 'B', cache.generation(), now + 1_000);
    expect(cache.get('a')).toBe('A');
    now += 50;
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBe('B');
    now += 50; // the TTL
    expect(cache.get('b')).toBeUndefined();

    cache.set('x', 'X', cache.generation(), now + 1_000);
    cache.set('y', 'Y', cache.generation(), now + 1_000);
    cache.set('z', 'Z', cache.generation(), now + 1_000);
    expect(cache.size).toBe(2);
    expect(cache.get('x')).toBeUndefined();
    expect(cache.get('z')).toBe('Z');
  });
});
