import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, type ErrorBody, expectStatus } from '../support/http.js';
import { createOrganization, newMember } from '../support/orgs.js';
import { type SignedInUser, signedInUser } from '../support/users.js';

/**
 * docs/api.md "Accounts scheduled for deletion", README "Configuration"
 * (CRON_SECRET): the purge of
 * accounts whose grace period has ended, behind `Authorization: Bearer <CRON_SECRET>`.
 */

const DAY = 24 * 60 * 60 * 1000;
const GRACE = 30 * DAY;
const CRON_SECRET = `cron-${crypto.randomUUID()}`;

describe('POST /api/cron/purge-accounts', { timeout: 120_000 }, () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp({ env: { CRON_SECRET } });
  });
  afterAll(() => t.close());

  const runCron = (app: Pick<TestApp, 'app'> = t, authorization: string | null = `Bearer ${CRON_SECRET}`) =>
    call(app, '/api/cron/purge-accounts', { method: 'POST', headers: authorization === null ? {} : { authorization } });

  async function expectUnauthorized(response: Response): Promise<void> {
    const body = await expectStatus<ErrorBody>(response, 401);
    expect(body.code).toBe('UNAUTHORIZED');
    expect(JSON.stringify(body)).not.toContain(CRON_SECRET);
  }

  const schedule = async (user: SignedInUser) =>
    expectStatus<{ deletedAt: string; purgeAfter: string }>(
      await call(t, '/api/users/me/deletion', { method: 'POST', jar: user.jar }),
      202,
    );

  /** Starts a test at `at` with nothing due from an earlier test (each test lives in its own year). */
  async function startAt(at: number): Promise<void> {
    t.clock.set(at);
    await expectStatus(await runCron(), 200);
  }

  const exists = async (userId: string) =>
    (await t.database.withOwner((owner) => owner.selectFrom('users').select('id').where('id', '=', userId).execute()))
      .length === 1;

  describe('authentication', () => {
    it('answers 200 { purged, failed } to the right secret', async () => {
      const body = await expectStatus(await runCron(), 200);
      expect(body).toEqual({ purged: 0, failed: 0 });
    });

    it('answers 401 UNAUTHORIZED to a wrong secret, another scheme, or no Authorization header', async () => {
      await expectUnauthorized(await runCron(t, `Bearer ${CRON_SECRET}x`));
      await expectUnauthorized(await runCron(t, `Bearer ${CRON_SECRET.slice(0, -1)}`));
      await expectUnauthorized(await runCron(t, 'Bearer '));
      await expectUnauthorized(await runCron(t, `Basic ${CRON_SECRET}`));
      await expectUnauthorized(await runCron(t, CRON_SECRET));
      await expectUnauthorized(await runCron(t, null));
    });

    it('answers 401 to every caller when CRON_SECRET is unset', async () => {
      const unset = await createTestApp({ database: t.database, clock: t.clock });
      try {
        expect(unset.config.cronSecret).toBeNull();
        await expectUnauthorized(await runCron(unset, `Bearer ${CRON_SECRET}`));
        await expectUnauthorized(await runCron(unset, 'Bearer some-bearer-token-0123456789'));
        await expectUnauthorized(await runCron(unset, 'Bearer '));
        await expectUnauthorized(await runCron(unset, null));
      } finally {
        await unset.close();
      }
    });

    it('purges nothing for a refused caller', async () => {
      // Users are made once the clock is set: scheduling deletion needs a recent sign-in.
      await startAt(Date.UTC(2031, 0, 1));
      const user = await signedInUser(t);
      await schedule(user);
      t.clock.advance(GRACE + DAY);
      await expectUnauthorized(await runCron(t, 'Bearer wrong-secret-0123456789'));
      expect(await exists(user.id)).toBe(true);
      // Clean up for the tests below: the right secret takes it.
      expect(await expectStatus(await runCron(), 200)).toEqual({ purged: 1, failed: 0 });
      expect(await exists(user.id)).toBe(false);
    });
  });

  describe('the grace period', () => {
    it('keeps an account scheduled at T at T + grace - 1 s, and purges it at T + grace', async () => {
      const T = Date.UTC(2032, 5, 15, 12, 0, 0);
      await startAt(T);
      const user = await signedInUser(t);
      const other = await signedInUser(t);
      const scheduled = await schedule(user);
      expect(scheduled.deletedAt).toBe(new Date(T).toISOString());
      expect(scheduled.purgeAfter).toBe(new Date(T + GRACE).toISOString());
      // Scheduled a second later: not yet due at T + grace.
      t.clock.advance(1000);
      await schedule(other);

      t.clock.set(T + GRACE - 1000);
      expect(await expectStatus(await runCron(), 200)).toEqual({ purged: 0, failed: 0 });
      expect(await exists(user.id)).toBe(true);
      await expectStatus(await call(t, '/api/users/me', { jar: user.jar }), 200);

      t.clock.set(T + GRACE);
      expect(await expectStatus(await runCron(), 200)).toEqual({ purged: 1, failed: 0 });
      expect(await exists(user.id)).toBe(false);
      expect(await exists(other.id)).toBe(true);
      await expectStatus(await call(t, '/api/users/me', { jar: user.jar }), 401);

      t.clock.set(T + GRACE + 1000);
      expect(await expectStatus(await runCron(), 200)).toEqual({ purged: 1, failed: 0 });
      expect(await exists(other.id)).toBe(false);
    });

    it('never purges an account that is not scheduled, or was reactivated', async () => {
      const T = Date.UTC(2033, 0, 1);
      await startAt(T);
      const never = await signedInUser(t);
      const reactivated = await signedInUser(t);
      await schedule(reactivated);
      t.clock.advance(DAY);
      await expectStatus(await call(t, '/api/users/me/reactivate', { method: 'POST', jar: reactivated.jar }), 200);

      t.clock.set(T + 10 * GRACE);
      expect(await expectStatus(await runCron(), 200)).toEqual({ purged: 0, failed: 0 });
      expect(await exists(never.id)).toBe(true);
      expect(await exists(reactivated.id)).toBe(true);
    });

    it('counts an account whose purge fails (sole Owner of an organization with members) in `failed`, and still purges the others', async () => {
      const T = Date.UTC(2034, 0, 1);
      await startAt(T);
      const org = await createOrganization(t, await signedInUser(t, { name: 'Stuck Owner' }));
      const member = await newMember(t, org, 'member');
      const first = await signedInUser(t);
      const last = await signedInUser(t);
      await schedule(first);
      t.clock.advance(1000);
      await schedule(org.owner);
      t.clock.advance(1000);
      await schedule(last);

      t.clock.set(T + GRACE + DAY);
      const linesBefore = t.logger.lines.length;
      expect(await expectStatus(await runCron(), 200)).toEqual({ purged: 2, failed: 1 });
      expect(await exists(first.id)).toBe(false);
      expect(await exists(last.id)).toBe(false);
      expect(await exists(org.owner.id)).toBe(true);
      const failure = t.logger.lines.slice(linesBefore).find((line) => line.event === 'account.purge_failed');
      expect(failure).toMatchObject({ userId: org.owner.id, code: 'OWNERSHIP_CONSTRAINT' });

      // The stuck account keeps its organization and membership untouched.
      const members = await expectStatus<{ userId: string; roleSlug: string }[]>(
        await call(t, '/api/members', { jar: member.jar }),
        200,
      );
      expect(members.find((m) => m.userId === org.owner.id)?.roleSlug).toBe('owner');

      // It fails again on the next run until the owner acts; reactivating takes it off the list.
      expect(await expectStatus(await runCron(), 200)).toEqual({ purged: 0, failed: 1 });
      await expectStatus(await call(t, '/api/users/me/reactivate', { method: 'POST', jar: org.owner.jar }), 200);
      expect(await expectStatus(await runCron(), 200)).toEqual({ purged: 0, failed: 0 });
    });
  });
});
