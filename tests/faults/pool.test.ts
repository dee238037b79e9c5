/**
 * An exhausted pool: the service runs with
 * DATABASE_POOL_MAX=1 while another client holds a lock the service needs.
 * The request that waits on the lock gives up after the lock timeout, the
 * requests queued for the one connection after the acquire timeout
 * (src/db/client.ts): every one answers — 503 SERVICE_UNAVAILABLE in the
 * contract's shape, or success — within a bounded time, never a hang; and
 * once the lock is gone the same process serves again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACQUIRE_TIMEOUT_MS, LOCK_TIMEOUT_MS } from '../../src/db/client.js';
import {
  type Answer,
  consistencyProblems,
  faultAnswerProblems,
  organizationOf,
  signedUpUser,
  startWorld,
  type User,
  type World,
} from './support/harness.js';
import { isOk, sleep } from './support/traffic.js';

/** The lock wait, then the wait for the connection it held, with slack for a loaded machine. */
const BOUND_MS = LOCK_TIMEOUT_MS + ACQUIRE_TIMEOUT_MS + 3000;

describe('an exhausted pool (DATABASE_POOL_MAX=1, a lock held elsewhere)', () => {
  let world: World;
  let user: User;
  let roleId: string;

  beforeAll(async () => {
    world = await startWorld({ DATABASE_POOL_MAX: '1' });
    user = await signedUpUser(world.service, 'pool');
    await organizationOf(world.service, user);
    const created = await world.service.request('/api/roles', {
      body: { name: 'Locked role', permissions: ['roles:read'] },
      jar: user.jar,
    });
    expect(created.status).toBe(201);
    roleId = created.body.id;
  });
  afterAll(async () => {
    await world?.destroy();
  });

  /** Another client takes `lockSql` in a transaction and holds it for `holdMs`; resolves once the lock is held. */
  async function holdLock(lockSql: string, holdMs: number): Promise<{ released: Promise<void> }> {
    const sql = world.inspect();
    let locked!: () => void;
    const held = new Promise<void>((resolve) => (locked = resolve));
    const released = sql
      .begin(async (tx) => {
        await tx.unsafe(lockSql);
        locked();
        await tx.unsafe(`select pg_sleep(${holdMs / 1000})`);
      })
      .then(() => undefined);
    await held;
    return { released };
  }

  async function burst(requests: (() => Promise<Answer>)[]): Promise<Answer[]> {
    return Promise.all(
      requests.map((send) =>
        send().catch((error: unknown) => ({
          status: 0,
          body: null,
          text: String(error),
          ms: Infinity,
          path: 'transport',
          method: '',
        })),
      ),
    );
  }

  it('a write blocked on a row lock and the reads queued behind it: all answered within the bound, as 503 or success', async () => {
    const { released } = await holdLock(`select id from roles where id = '${roleId}' for update`, 20_000);
    const s = world.service;
    const answers = await burst([
      () =>
        s.request(`/api/roles/${roleId}`, {
          method: 'PATCH',
          body: { description: 'waits for the lock' },
          jar: user.jar,
        }),
      ...Array.from({ length: 4 }, () => () => s.request('/api/roles', { jar: user.jar })),
      () => s.request('/api/session', { jar: user.jar }),
      () => s.request('/api/members', { jar: user.jar }),
      () => s.request('/api/health'),
    ]);
    console.log(
      `[faults] pool ${JSON.stringify(answers.map((a) => ({ request: `${a.method} ${a.path}`, status: a.status, ms: Math.round(a.ms) })))}`,
    );
    expect(answers.map((a) => faultAnswerProblems(a, isOk)).filter(Boolean)).toEqual([]);
    expect(answers.filter((a) => a.ms > BOUND_MS).map((a) => `${a.method} ${a.path} ${Math.round(a.ms)} ms`)).toEqual(
      [],
    );
    // The write could not have its lock: refused, not applied.
    expect(answers[0]!.status).toBe(503);
    expect(answers.filter((a) => a.status === 503).length).toBeGreaterThan(1);
    expect(world.service.alive()).toBe(true);

    await released;
    await sleep(200);
    // The same process serves again, the write included.
    const after = await s.request(`/api/roles/${roleId}`, {
      method: 'PATCH',
      body: { description: 'after the lock' },
      jar: user.jar,
    });
    expect(after.status, after.text).toBe(200);
    expect(after.body.description).toBe('after the lock');
  });

  it('a table locked against reads: the same bound, then service resumes', async () => {
    const { released } = await holdLock('lock table roles in access exclusive mode', 15_000);
    const s = world.service;
    const answers = await burst([
      ...Array.from({ length: 3 }, () => () => s.request('/api/roles', { jar: user.jar })),
      () =>
        s.request('/api/roles', {
          body: { name: `Queued ${crypto.randomUUID().slice(0, 6)}`, permissions: ['roles:read'] },
          jar: user.jar,
        }),
      () => s.request('/api/health'),
    ]);
    console.log(
      `[faults] pool (table lock) ${JSON.stringify(answers.map((a) => ({ request: `${a.method} ${a.path}`, status: a.status, ms: Math.round(a.ms) })))}`,
    );
    expect(answers.map((a) => faultAnswerProblems(a, isOk)).filter(Boolean)).toEqual([]);
    expect(answers.filter((a) => a.ms > BOUND_MS).map((a) => `${a.method} ${a.path} ${Math.round(a.ms)} ms`)).toEqual(
      [],
    );
    expect(answers.filter((a) => a.status === 503).length).toBeGreaterThan(0);
    await released;
    await sleep(200);
    const roles = await s.request('/api/roles', { jar: user.jar });
    expect(roles.status).toBe(200);
    expect(await consistencyProblems(world.inspect())).toEqual([]);
  });
});
