/**
 * Exactly one winner where one is due.
 * The races already proven elsewhere are not repeated here:
 *   tests/db/queries/api-keys.test.ts  twenty concurrent revokes of one key: one audit entry
 *   tests/db/races.test.ts             Owners demoting each other; concurrent creations of one
 *                                      role name (one 201, the rest 409); concurrent sign-ups with
 *                                      one email (one user); a role deleted while a member moves in
 *   tests/middleware/rate-limit*       a parallel burst lets exactly the limit through
 * This file adds the other "one winner" cases: ownership transfers, deletes of
 * one role, acceptances of one invitation, two Owners leaving or removing each
 * other at once. On PGlite (npm test) requests queue for its one connection;
 * the `faults` project (`npm run test:faults`) runs this file again on a PostgreSQL server,
 * where they truly overlap.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectStatus } from '../support/http.js';
import {
  addMember,
  auditRows,
  createOrganization,
  createRole,
  invitationIdFromMail,
  invite,
  newMember,
  roleBySlug,
  storedMemberRoles,
  type TestOrganization,
} from '../support/orgs.js';
import { PASSWORD, signedInUser } from '../support/users.js';

const ROUNDS = 6;

describe('one winner', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp();
  }, 120_000);
  afterAll(async () => {
    if (!t) return;
    // Whatever raced, every organization kept an Owner.
    const orphaned = await t.database.withOwner(async (owner) => {
      const { rows } = await sql<{ id: string }>`
        select o.id from organizations o
        where not exists (select 1 from members m where m.organization_id = o.id and m.role = 'owner')`.execute(owner);
      return rows;
    });
    expect(orphaned).toEqual([]);
    await t.close();
  });

  async function statuses(responses: Response[]): Promise<{ status: number; code?: string }[]> {
    return Promise.all(
      responses.map(async (res) => ({
        status: res.status,
        code: ((await res.json()) as { code?: string } | null)?.code,
      })),
    );
  }

  const winners = (answers: { status: number }[]) => answers.filter((a) => a.status === 200);

  /** Exactly one 200, and no 5xx among the others. */
  function expectOneWinner(answers: { status: number; code?: string }[]) {
    expect(winners(answers), JSON.stringify(answers)).toHaveLength(1);
    expect(
      answers.every((a) => a.status < 500),
      JSON.stringify(answers),
    ).toBe(true);
  }

  it('an Owner handing ownership to two Admins at once: one transfer, the other 403 NOT_OWNER, one Owner, one audit entry', async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const org = await createOrganization(t, await signedInUser(t));
      const [first, second] = [await newMember(t, org, 'admin'), await newMember(t, org, 'admin')];
      const answers = await statuses(
        await Promise.all(
          [first, second].map((target) =>
            call(t, '/api/roles/transfer-ownership', { body: { targetMemberId: target.memberId }, jar: org.owner.jar }),
          ),
        ),
      );
      expect(winners(answers), JSON.stringify(answers)).toHaveLength(1);
      // The loser's session was read before or after the winner committed: not the Owner any more (403 NOT_OWNER).
      expect(
        answers.filter((a) => a.status !== 200),
        JSON.stringify(answers),
      ).toEqual([{ status: 403, code: 'NOT_OWNER' }]);
      const ownerRole = (await storedRoleIds(org)).owner;
      const stored = await storedMemberRoles(t, org.id);
      expect(Object.values(stored).filter((roleId) => roleId === ownerRole)).toHaveLength(1);
      expect(await auditRows(t, org.id, 'ownership.transferred')).toHaveLength(1);
    }
  }, 300_000);

  it('the same custom role deleted five times at once: one 200, four 404, one role.deleted entry, members moved once', async () => {
    const org = await createOrganization(t, await signedInUser(t));
    const member = await newMember(t, org, 'member');
    const viewer = await roleBySlug(t, org.owner, 'viewer');
    for (let round = 0; round < ROUNDS; round += 1) {
      const role = await createRole(t, org.owner, { name: `Short lived ${round}`, permissions: ['roles:read'] });
      await expectStatus(
        await call(t, `/api/admin/members/${member.memberId}`, {
          method: 'PATCH',
          body: { roleId: role.id },
          jar: org.owner.jar,
        }),
        200,
      );
      const answers = await statuses(
        await Promise.all(
          Array.from({ length: 5 }, () => call(t, `/api/roles/${role.id}`, { method: 'DELETE', jar: org.owner.jar })),
        ),
      );
      expect(winners(answers), JSON.stringify(answers)).toHaveLength(1);
      expect(answers.filter((a) => a.status !== 200)).toEqual(
        Array.from({ length: 4 }, () => ({ status: 404, code: 'NOT_FOUND' })),
      );
      const entries = (await auditRows(t, org.id, 'role.deleted')).filter((row) => row.metadata.roleId === role.id);
      expect(entries).toHaveLength(1);
      expect(entries[0]!.metadata.reassignedMembers).toBe(1);
      expect((await storedMemberRoles(t, org.id))[member.memberId]).toBe(viewer.id);
    }
  }, 300_000);

  it('one invitation accepted from two sessions at once: one membership', async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const org = await createOrganization(t, await signedInUser(t));
      const invitee = await signedInUser(t);
      const secondJar = (await signedInAgain(invitee.email)).jar;
      await expectStatus(
        await invite(t, org.owner, { email: invitee.email, role: 'viewer', organizationId: org.id }),
        200,
      );
      const invitationId = invitationIdFromMail(t, invitee.email);
      const answers = await statuses(
        await Promise.all(
          [invitee.jar, secondJar].map((jar) =>
            call(t, '/api/auth/organization/accept-invitation', { body: { invitationId }, jar }),
          ),
        ),
      );
      expectOneWinner(answers);
      const memberships = await t.database.withOwner((owner) =>
        owner
          .selectFrom('members')
          .select(['id', 'role_id'])
          .where('organization_id', '=', org.id)
          .where('user_id', '=', invitee.id)
          .execute(),
      );
      expect(memberships).toHaveLength(1);
      // With the invited role, not the library's default.
      expect(memberships[0]!.role_id).toBe((await roleBySlug(t, org.owner, 'viewer')).id);
    }
  }, 300_000);

  it('two Owners leaving at once: one leaves, the other stays Owner', async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const org = await twoOwners();
      const answers = await statuses(
        await Promise.all(
          [org.owner, org.second].map((who) =>
            call(t, '/api/auth/organization/leave', { body: { organizationId: org.id }, jar: who.jar }),
          ),
        ),
      );
      expectOneWinner(answers);
      expect(await ownersOf(org.id)).toHaveLength(1);
    }
  }, 300_000);

  it('two Owners removing each other at once: the organization keeps an Owner', async () => {
    for (let round = 0; round < ROUNDS; round += 1) {
      const org = await twoOwners();
      const answers = await statuses(
        await Promise.all([
          call(t, '/api/auth/organization/remove-member', {
            body: { memberIdOrEmail: org.second.memberId, organizationId: org.id },
            jar: org.owner.jar,
          }),
          call(t, '/api/auth/organization/remove-member', {
            body: { memberIdOrEmail: org.ownerMemberId, organizationId: org.id },
            jar: org.second.jar,
          }),
        ]),
      );
      expect(
        answers.every((a) => a.status < 500),
        JSON.stringify(answers),
      ).toBe(true);
      expect(winners(answers).length, JSON.stringify(answers)).toBeLessThanOrEqual(1);
      expect(await ownersOf(org.id)).toHaveLength(1);
    }
  }, 300_000);

  async function storedRoleIds(org: TestOrganization): Promise<Record<string, string>> {
    const roles = await t.database.withOwner((owner) =>
      owner.transaction().execute(async (trx) => {
        await sql`select set_config('app.tenant_id', ${org.id}, true)`.execute(trx);
        return trx
          .selectFrom('roles')
          .select(['id', 'slug'])
          .where('tenant_id', '=', org.id)
          .where('is_default', '=', true)
          .execute();
      }),
    );
    return Object.fromEntries(roles.map((role: { id: string; slug: string }) => [role.slug, role.id]));
  }

  async function ownersOf(organizationId: string): Promise<string[]> {
    const rows = await t.database.withOwner((owner) =>
      owner
        .selectFrom('members')
        .select('id')
        .where('organization_id', '=', organizationId)
        .where('role', '=', 'owner')
        .execute(),
    );
    return rows.map((row: { id: string }) => row.id);
  }

  /** An organization with two Owners (the second promoted by the first). */
  async function twoOwners() {
    const org = await createOrganization(t, await signedInUser(t));
    const second = await signedInUser(t);
    const memberId = await addMember(t, org, second, 'admin');
    const ownerRole = (await storedRoleIds(org)).owner!;
    await expectStatus(
      await call(t, `/api/admin/members/${memberId}`, {
        method: 'PATCH',
        body: { roleId: ownerRole },
        jar: org.owner.jar,
      }),
      200,
    );
    expect(await ownersOf(org.id)).toHaveLength(2);
    return { ...org, second: { ...second, memberId } };
  }

  async function signedInAgain(email: string) {
    const jar = new CookieJar();
    await expectStatus(await call(t, '/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar }), 200);
    return { jar };
  }
});
