/**
 * How stale can another instance be? Two processes of the real Node entry on
 * one PostgreSQL database (tests/support/instances.ts): a member's role is
 * flipped through A, `flips` times, and after each flip's answer the member
 * reads its session through A and then through B until B answers the new
 * role's permissions. Reported: how many answers were stale on each instance
 * (the rule: none on A, the writing instance), and the worst and p99 time
 * from the flip's answer to B's first fresh answer (the rule: within one
 * second; docs/performance.md "Staleness across instances").
 */

import { addressesFor, bodyOf, join, newOrganization, newUser } from '../support/instance-flows.js';
import { type Instance, startInstance } from '../support/instances.js';

export interface Staleness {
  flips: number;
  /** Answers through A, the writing instance, that showed the previous role. */
  staleOnWriter: number;
  /** Answers through B that showed the previous role (each retried at once). */
  staleOnOther: number;
  /** From the flip's answer to B's first answer with the new role. */
  worstMs: number;
  p99Ms: number;
  medianMs: number;
}

const GIVE_UP_MS = 5_000;

export async function measureStaleness(env: Record<string, string>, flips = 1_000): Promise<Staleness> {
  const instanceEnv = { ...env, MIGRATE_ON_START: 'false', RATE_LIMIT_ENABLED: 'false', LOG_LEVEL: 'info' };
  const [a, b] = await Promise.all([startInstance('A', instanceEnv), startInstance('B', instanceEnv)]);
  try {
    return await flipAndRead(a, b, flips);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
}

async function flipAndRead(a: Instance, b: Instance, flips: number): Promise<Staleness> {
  const run = crypto.randomUUID().replaceAll('-', '').slice(0, 8);
  const address = addressesFor(run);
  const boss = await newUser(a, 'stale-owner', run, address());
  const organizationId = await newOrganization(a, boss, run);
  const member = await newUser(b, 'stale-member', run, address());
  const memberId = await join(organizationId, boss, a, member, b, 'admin');
  const roles = bodyOf(await a.request('/api/roles', { jar: boss.jar, ip: boss.ip }), 200) as {
    id: string;
    slug: string;
    permissions: string[];
  }[];
  const sorted = (permissions: string[]) => [...permissions].sort().join(' ');
  const admin = roles.find((role) => role.slug === 'admin')!;
  const viewer = roles.find((role) => role.slug === 'viewer')!;
  const read = async (via: Instance) =>
    sorted(bodyOf(await via.request('/api/session', { jar: member.jar, ip: member.ip }), 200).permissions);

  let staleOnWriter = 0;
  let staleOnOther = 0;
  const times: number[] = [];
  for (let i = 0; i < flips; i += 1) {
    const target = i % 2 === 0 ? viewer : admin;
    const expected = sorted(target.permissions);
    // Both instances hold the role as it stands (whatever either keeps between requests).
    await read(a);
    await read(b);
    bodyOf(
      await a.request(`/api/admin/members/${memberId}`, {
        method: 'PATCH',
        body: { roleId: target.id },
        jar: boss.jar,
        ip: boss.ip,
      }),
      200,
    );
    const answered = performance.now();
    if ((await read(a)) !== expected) staleOnWriter += 1;
    for (;;) {
      const seen = await read(b);
      const elapsed = performance.now() - answered;
      if (seen === expected) {
        times.push(elapsed);
        break;
      }
      staleOnOther += 1;
      if (elapsed > GIVE_UP_MS) {
        times.push(elapsed);
        break;
      }
    }
  }
  times.sort((x, y) => x - y);
  const at = (q: number) => Math.round(times[Math.min(times.length - 1, Math.floor(q * times.length))]! * 100) / 100;
  return {
    flips,
    staleOnWriter,
    staleOnOther,
    worstMs: at(1),
    p99Ms: at(0.99),
    medianMs: at(0.5),
  };
}
