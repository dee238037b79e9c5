/**
 * The rate-limit store goes away (docs/design.md "Decisions", rate-limit
 * store failures): the auth tier fails closed, 503 SERVICE_UNAVAILABLE
 * within about a second (RATE_LIMIT_STORE_TIMEOUT_MS, default 1 s), and
 * writes nothing; the global tier fails open with an error log line; and
 * when the store is back both tiers count again, in the same process. Two
 * ways to go away: killed (connections refused) and frozen (SIGSTOP: it
 * accepts and never answers).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CookieJar } from '../support/http.js';
import {
  type Answer,
  consistencyProblems,
  faultAnswerProblems,
  organizationOf,
  PASSWORD,
  signedUpUser,
  startWorld,
  type User,
  type World,
} from './support/harness.js';
import { isOk, sleep } from './support/traffic.js';

/** RATE_LIMIT_STORE_TIMEOUT_MS (1 s) plus slack for a loaded machine: "about a second". */
const FAIL_CLOSED_WITHIN_MS = 2000;

describe('the rate-limit store goes away', () => {
  let world: World;
  let user: User;

  beforeAll(async () => {
    world = await startWorld();
    user = await signedUpUser(world.service, 'redis');
    await organizationOf(world.service, user);
  });
  afterAll(async () => {
    await world?.destroy();
  });

  const signIn = () =>
    world.service.request('/api/auth/sign-in/email', {
      body: { email: user.email, password: PASSWORD },
      jar: new CookieJar(),
    });
  const AUTH_TIER: (() => Promise<Answer>)[] = [
    signIn,
    () =>
      world.service.request('/api/auth/sign-up/email', {
        body: { email: `new-${crypto.randomUUID().slice(0, 8)}@example.test`, password: PASSWORD, name: 'New' },
      }),
    () =>
      world.service.request('/api/auth/request-password-reset', {
        body: { email: user.email, redirectTo: 'http://localhost:3000/reset' },
      }),
    () => world.service.request('/api/users/me/purge', { body: { confirmEmail: user.email }, jar: user.jar }),
  ];
  const GLOBAL_TIER: (() => Promise<Answer>)[] = [
    () => world.service.request('/api/roles', { jar: user.jar }),
    () => world.service.request('/api/session', { jar: user.jar }),
    () => world.service.request('/api/health'),
    () =>
      world.service.request('/api/roles', {
        body: { name: `Open ${crypto.randomUUID().slice(0, 6)}`, permissions: ['roles:read'] },
        jar: user.jar,
      }),
  ];
  const all = (sends: (() => Promise<Answer>)[]) => Promise.all(sends.map((send) => send()));

  async function rows(): Promise<{ users: number; sessions: number; verifications: number }> {
    const [row] =
      await world.inspect()`select (select count(*)::int from users) as users, (select count(*)::int from sessions) as sessions, (select count(*)::int from verifications) as verifications`;
    return row as { users: number; sessions: number; verifications: number };
  }

  async function expectFailClosedAndOpen(label: string) {
    const before = await rows();
    const failuresBefore = world.service.lines.filter((line) => line.event === 'rate_limit.store_failed').length;
    const auth = await all(AUTH_TIER);
    const open = await all(GLOBAL_TIER);
    console.log(
      `[faults] ${label} ${JSON.stringify([...auth, ...open].map((a) => ({ request: `${a.method} ${a.path}`, status: a.status, ms: Math.round(a.ms) })))}`,
    );

    // Auth tier: closed, in the contract's shape, within about a second, nothing written.
    for (const answer of auth) {
      expect(
        faultAnswerProblems(answer, () => false),
        `${label}: ${answer.path}`,
      ).toBeNull();
      expect(answer.status).toBe(503);
      expect(answer.ms, `${label}: ${answer.path} took ${Math.round(answer.ms)} ms`).toBeLessThan(
        FAIL_CLOSED_WITHIN_MS,
      );
    }
    expect(await rows(), `${label}: a refused sign-up, sign-in or reset wrote nothing`).toEqual(before);

    // Global tier: open (the request is served), logged at error level.
    for (const answer of open)
      expect(isOk(answer.status), `${label}: ${answer.path} ${answer.status} ${answer.text.slice(0, 120)}`).toBe(true);
    const failures = world.service.lines
      .filter((line) => line.event === 'rate_limit.store_failed')
      .slice(failuresBefore);
    expect(failures.some((line) => line.tier === 'auth' && line.level === 'error')).toBe(true);
    expect(failures.some((line) => line.tier === 'global' && line.failOpen === true && line.level === 'error')).toBe(
      true,
    );
    expect(world.service.alive()).toBe(true);
  }

  async function expectCountingAgain(label: string) {
    // The store is back: the same process signs in again (within a few tries while connections are remade).
    let last: Answer | null = null;
    for (let i = 0; i < 50 && last?.status !== 200; i += 1) {
      last = await signIn();
      if (last.status !== 200) await sleep(200);
    }
    expect(last?.status, `${label}: ${last?.text}`).toBe(200);
    for (const answer of await all([signIn, ...GLOBAL_TIER])) {
      expect(faultAnswerProblems(answer, isOk), `${label} after`).toBeNull();
      expect(isOk(answer.status)).toBe(true);
    }
  }

  it('killed: the auth tier answers 503 at once, the global tier serves; both count again when it is back', async () => {
    expect((await signIn()).status).toBe(200);
    await world.redis.stop();
    await expectFailClosedAndOpen('redis killed');
    await world.redis.start();
    await expectCountingAgain('redis restarted');
  });

  it('frozen (accepts, never answers): the auth tier answers 503 after about a second, the global tier serves after the same wait', async () => {
    world.redis.freeze(true);
    try {
      await expectFailClosedAndOpen('redis frozen');
      const slowest = await all(AUTH_TIER);
      for (const answer of slowest) expect(answer.ms).toBeGreaterThanOrEqual(900);
    } finally {
      world.redis.freeze(false);
    }
    await expectCountingAgain('redis thawed');
    expect(await consistencyProblems(world.inspect())).toEqual([]);
  });
});
