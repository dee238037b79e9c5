/**
 * PostgreSQL goes away during traffic: every request gets
 * 503 SERVICE_UNAVAILABLE in the contract's shape (never a 500, never a
 * 401 because the session could not be read), in bounded time; the process
 * stays up; when PostgreSQL is back it serves again without a restart; and
 * nothing is half-written (every organization has its Owner, every
 * acknowledged write is committed with its audit entry).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACQUIRE_TIMEOUT_MS } from '../../src/db/client.js';
import {
  consistencyProblems,
  faultAnswerProblems,
  organizationOf,
  signedUpUser,
  startWorld,
  type World,
} from './support/harness.js';
import { isOk, type Sent, sleep, startTraffic, type Tenant, type Traffic, waitHealthy } from './support/traffic.js';

/** postgres.js connect_timeout is 5 s; an answer during the outage comes well within it plus slack. */
const ANSWER_WITHIN_MS = 7000;

describe('PostgreSQL stops during traffic', () => {
  let world: World;
  let tenants: Tenant[];

  beforeAll(async () => {
    world = await startWorld();
    tenants = [];
    for (let i = 0; i < 4; i += 1) {
      const user = await signedUpUser(world.service, `tenant${i}`);
      tenants.push({ ...user, organizationId: await organizationOf(world.service, user) });
    }
  });
  afterAll(async () => {
    await world?.destroy();
  });

  async function outage(mode: 'fast' | 'immediate') {
    const traffic = startTraffic(world.service, tenants);
    await sleep(1500);
    const stoppedAt = performance.now();
    await world.pg.stop(mode);
    const stopped = performance.now();
    await sleep(3000);
    const duringEnd = performance.now();
    expect(
      world.service.alive(),
      `the service process stays up while the database is down: ${JSON.stringify(world.service.lines.slice(-8))}`,
    ).toBe(true);
    await world.pg.start();
    const recoveredIn = await waitHealthy(world.service);
    const healthyAt = performance.now();
    await sleep(2500);
    await traffic.stop();
    return { traffic, stoppedAt, stopped, duringEnd, healthyAt, recoveredIn };
  }

  function report(label: string, traffic: Traffic, windows: { stopped: number; duringEnd: number; healthyAt: number }) {
    const during = traffic.answers.filter((a) => a.at >= windows.stopped && a.at < windows.duringEnd);
    const after = traffic.answers.filter((a) => a.at >= windows.healthyAt + 500);
    const summary = {
      label,
      answers: traffic.answers.length,
      during: {
        count: during.length,
        statuses: tally(during),
        maxMs: Math.round(Math.max(0, ...during.map((a) => a.ms))),
      },
      after: { count: after.length, statuses: tally(after) },
      slowest: [...traffic.answers]
        .sort((x, y) => y.ms - x.ms)
        .slice(0, 5)
        .map((a) => ({
          request: `${a.method} ${a.path}`,
          status: a.status,
          ms: Math.round(a.ms),
          sentAfterStopMs: Math.round(a.at - windows.stopped),
        })),
    };
    console.log(`[faults] ${JSON.stringify(summary)}`);
    return { during, after };
  }

  for (const mode of ['fast', 'immediate'] as const) {
    it(`pg_ctl stop -m ${mode}: 503 in the contract's shape while down, the process stays up, service resumes without a restart`, async () => {
      const { traffic, stopped, duringEnd, healthyAt, recoveredIn } = await outage(mode);
      const { during, after } = report(
        `stop -m ${mode} (healthy ${Math.round(recoveredIn)} ms after restart)`,
        traffic,
        { stopped, duringEnd, healthyAt },
      );

      // Nothing but success or a shaped 503, at any time (before, during, after).
      expect(traffic.answers.map((a) => faultAnswerProblems(a, isOk)).filter(Boolean)).toEqual([]);
      // The outage was seen, and answered in bounded time.
      expect(during.length).toBeGreaterThan(10);
      expect(during.filter((a) => a.status === 503).length).toBeGreaterThan(during.length / 2);
      expect(during.filter((a) => a.ms > ANSWER_WITHIN_MS)).toEqual([]);
      // A request waiting for a connection is refused by the connect that failed for it, or served by
      // the one that opened for it: none waits out the pool's acquire timeout, during the outage or
      // after it (patches/postgres+3.4.9.patch; before it, a reservation a reconnect had taken
      // up was dropped when the database came back).
      expect(
        traffic.answers
          .filter((a) => a.ms >= ACQUIRE_TIMEOUT_MS)
          .map((a) => `${a.method} ${a.path} ${a.status} after ${Math.round(a.ms)} ms`),
      ).toEqual([]);
      // Back without a restart: the same process, every request answered again.
      expect(world.service.alive()).toBe(true);
      expect(recoveredIn).toBeLessThan(20_000);
      expect(after.length).toBeGreaterThan(10);
      expect(
        after.filter((a) => !isOk(a.status)).map((a) => `${a.method} ${a.path} ${a.status} ${a.text.slice(0, 120)}`),
      ).toEqual([]);

      // Nothing half-written.
      const sql = world.inspect();
      expect(await consistencyProblems(sql)).toEqual([]);
      await expectAcknowledgedWritesCommitted(traffic);
    });
  }

  it('logs each failure with a request id and keeps stack traces and connection strings out of answers', async () => {
    const failures = world.service.lines.filter((line) => line.event === 'request.failed');
    expect(failures.length).toBeGreaterThan(0);
    for (const line of failures) {
      expect(line.requestId).toEqual(expect.any(String));
      expect(line.code).toBe('SERVICE_UNAVAILABLE');
    }
    const leaked = world.service.lines.filter((line) => JSON.stringify(line).includes('runtime:runtime'));
    expect(leaked).toEqual([]);
  });

  async function expectAcknowledgedWritesCommitted(traffic: Traffic) {
    const sql = world.inspect();
    const roleIds = traffic.createdRoles.map((r) => r.id);
    const keyIds = traffic.createdKeys.map((k) => k.id);
    const revokedIds = traffic.revokedKeys.map((k) => k.id);
    expect(roleIds.length + keyIds.length).toBeGreaterThan(0);
    const roles = roleIds.length ? await sql`select id from roles where id = any(${roleIds}::uuid[])` : [];
    expect(roles.length, 'every 201 role is stored').toBe(roleIds.length);
    const keys = keyIds.length ? await sql`select id, revoked_at from api_keys where id = any(${keyIds}::uuid[])` : [];
    expect(keys.length, 'every 201 key is stored').toBe(keyIds.length);
    const revoked = revokedIds.length
      ? await sql`select id from api_keys where id = any(${revokedIds}::uuid[]) and revoked_at is not null`
      : [];
    expect(revoked.length, 'every 200 revocation is stored').toBe(revokedIds.length);
  }
});

function tally(answers: Sent[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const answer of answers) out[answer.status] = (out[answer.status] ?? 0) + 1;
  return out;
}
