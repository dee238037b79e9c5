/**
 * Account enumeration, the measurement of enumeration.test.ts and
 * enumeration-slow-mailer.test.ts: sign-up, sign-in and password reset answer
 * a registered and an unregistered email alike — status, body shape,
 * cookies — and in about the same time.
 *
 * Timing: TRIES pairs of requests, one per side, the order inside each pair
 * random (drift in machine load hits both sides); the median of the paired
 * differences must stay within an allowance (BOUND_MS, widened on a noisy
 * machine, see `allowance`). Measured in process (no network), the most an
 * observer could ever see; a real one adds network jitter on top. See
 * docs/security.md "Enumeration" for the bound and why it is enough.
 *
 * Two mailers: the development one (a log line, as in every other suite),
 * and one that takes MAILER_LATENCY_MS per mail, as a real provider's HTTP
 * round trip does. With it, the mails that finished before each answer are
 * counted per side: they must be the same number whatever the noise (a flow
 * that waits for a mail only when the account exists shows the provider's
 * latency to anyone timing it). Sign-in sends no mail and runs once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmailMessage, Mailer } from '../../src/auth/email.js';
import type { Logger } from '../../src/shared/logger.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call } from '../support/http.js';
import { median } from '../support/statistics.js';
import { PASSWORD, signedUpUser, uniqueEmail } from '../support/users.js';
import { cookieShape, shapeOf, shuffled } from './support.js';

const TRIES = 30;
const WARMUP = 3;
export const MAILER_LATENCY_MS = 60;
/**
 * The largest median difference allowed between the two sides, in ms (on
 * a quiet machine; on a loaded one the allowance widens with the measured
 * noise, see `allowance`). A network observer sees several ms of jitter per
 * request over the internet and may send 5 auth requests a minute per
 * address (then a 5-minute block): a difference this small needs hundreds
 * of samples per guessed email to tell apart, while a mail sent on one side
 * only (tens to hundreds of ms) or a skipped password hash would show in a
 * handful.
 */
const BOUND_MS = 10;

interface Side {
  name: string;
  send: (i: number) => Promise<Response>;
  /** The address the request names (to count the mails sent to it before the answer). */
  email: (i: number) => string;
}

interface Measured {
  flow: string;
  sides: {
    name: string;
    medianMs: number;
    status: number[];
    shape: string;
    cookies: string;
    mailsBeforeAnswer: number[];
  }[];
  /** Median of the paired differences (a minus b), ms. */
  differenceMs: number;
  /** What the difference is allowed to be on this run (BOUND_MS, widened by measured noise). */
  allowanceMs: number;
}

const measurements: Measured[] = [];
const round = (value: number) => Math.round(value * 100) / 100;

/**
 * BOUND_MS, or four standard errors of the median of the paired
 * differences when the machine is noisier than that (a 2-core CI box busy
 * with other suites). Under noise a smaller difference could neither be
 * measured here nor by an observer; the mail counts below catch a mail on
 * one side whatever the noise.
 */
function allowance(differences: number[]): number {
  const center = median(differences);
  const mad = median(differences.map((d) => Math.abs(d - center)));
  const standardError = (1.4826 * mad * 1.2533) / Math.sqrt(differences.length);
  return round(Math.max(BOUND_MS, 4 * standardError));
}

/**
 * TRIES pairs of timed requests, the order inside each pair random (drift in
 * machine load hits both sides); answers compared for status, body shape,
 * cookies and how many mails went out before the answer.
 */
async function measure(flow: string, a: Side, b: Side, sends?: SendRecord[]): Promise<Measured> {
  for (let i = 0; i < WARMUP; i += 1) {
    await (await a.send(-1 - i)).text();
    await (await b.send(-1 - i)).text();
  }
  const times: Record<string, number[]> = { [a.name]: [], [b.name]: [] };
  const seen: Record<string, { status: Set<number>; shapes: Set<string>; cookies: Set<string>; mails: Set<number> }> =
    {};
  for (const side of [a, b])
    seen[side.name] = { status: new Set(), shapes: new Set(), cookies: new Set(), mails: new Set() };
  const differences: number[] = [];
  for (let i = 0; i < TRIES; i += 1) {
    const pair: Record<string, number> = {};
    for (const side of shuffled([a, b])) {
      const email = side.email(i);
      const started = performance.now();
      const res = await side.send(i);
      const text = await res.text();
      const answered = performance.now();
      pair[side.name] = answered - started;
      const record = seen[side.name]!;
      // Mails to this address started by this request and finished before its answer (what an observer could time).
      if (sends)
        record.mails.add(
          sends.filter((m) => m.to === email && m.startedAt >= started && m.finishedAt <= answered).length,
        );
      record.status.add(res.status);
      record.shapes.add(JSON.stringify(shapeOf(text ? JSON.parse(text) : null)));
      record.cookies.add(JSON.stringify(cookieShape(res)));
    }
    times[a.name]!.push(pair[a.name]!);
    times[b.name]!.push(pair[b.name]!);
    differences.push(pair[a.name]! - pair[b.name]!);
  }
  const result: Measured = {
    flow,
    sides: [a, b].map((side) => ({
      name: side.name,
      medianMs: round(median(times[side.name]!)),
      status: [...seen[side.name]!.status],
      shape: [...seen[side.name]!.shapes].join(' | '),
      cookies: [...seen[side.name]!.cookies].join(' | '),
      mailsBeforeAnswer: [...seen[side.name]!.mails],
    })),
    differenceMs: round(median(differences)),
    allowanceMs: allowance(differences),
  };
  measurements.push(result);
  console.log(`[enumeration] ${JSON.stringify(result)}`);
  return result;
}

/** One status, body shape, cookie set and mail count per side, the same on both; the timing difference within the allowance. */
function expectIndistinguishable(result: Measured) {
  const [a, b] = result.sides as [Measured['sides'][number], Measured['sides'][number]];
  expect(a.status, `${result.flow}: ${a.name} statuses`).toHaveLength(1);
  expect(b.status, `${result.flow}: statuses`).toEqual(a.status);
  expect(a.shape.includes('|'), `${result.flow}: one body shape per side`).toBe(false);
  expect(b.shape, `${result.flow}: body shape`).toBe(a.shape);
  expect(b.cookies, `${result.flow}: cookies`).toBe(a.cookies);
  expect(a.mailsBeforeAnswer.length, `${result.flow}: ${a.name} mails before the answer`).toBeLessThanOrEqual(1);
  expect(b.mailsBeforeAnswer, `${result.flow}: mails before the answer`).toEqual(a.mailsBeforeAnswer);
  expect(Math.abs(result.differenceMs), `${result.flow}: median difference (ms)`).toBeLessThan(result.allowanceMs);
}

interface SendRecord {
  to: string;
  startedAt: number;
  finishedAt: number;
}

/** A provider that takes MAILER_LATENCY_MS per mail (an HTTP round trip), records when, and logs it as the development mailer does. */
function slowMailer(): Mailer & { logger?: Logger; sends: SendRecord[] } {
  const mailer: Mailer & { logger?: Logger; sends: SendRecord[] } = {
    sends: [],
    async send(message: EmailMessage) {
      const startedAt = performance.now();
      await new Promise((resolve) => setTimeout(resolve, MAILER_LATENCY_MS));
      mailer.sends.push({ to: message.to, startedAt, finishedAt: performance.now() });
      mailer.logger?.info('email', { to: message.to, subject: message.subject, text: message.text ?? '' });
    },
  };
  return mailer;
}

/** The four flows, each measured on one app (with the slow mailer: sign-up and reset; sign-in sends no mail). */
export function flows(label: string, options: { slowMailer?: boolean } = {}) {
  describe(label, () => {
    let t: TestApp;
    let registered: string;
    let unverified: string;
    let mailer: ReturnType<typeof slowMailer> | undefined;

    beforeAll(async () => {
      mailer = options.slowMailer ? slowMailer() : undefined;
      t = await createTestApp(mailer ? { mailer } : {});
      if (mailer) mailer.logger = t.logger;
      registered = (await signedUpUser(t)).email;
      unverified = uniqueEmail('unverified');
      expect(
        (await call(t, '/api/auth/sign-up/email', { body: { email: unverified, password: PASSWORD, name: 'U' } }))
          .status,
      ).toBe(200);
    });
    afterAll(() => t.close());

    const signUp = (email: string) =>
      call(t, '/api/auth/sign-up/email', { body: { email, password: PASSWORD, name: 'Someone' } });
    const signIn = (email: string, password: string) =>
      call(t, '/api/auth/sign-in/email', { body: { email, password }, jar: new CookieJar() });
    const reset = (email: string) =>
      call(t, '/api/auth/request-password-reset', { body: { email, redirectTo: `${t.config.auth.appUrl}/reset` } });
    /** A fresh address per try, remembered so the mail count can name it. */
    const fresh = (label: string) => {
      const emails = new Map<number, string>();
      const email = (i: number) => {
        if (!emails.has(i)) emails.set(i, uniqueEmail(label));
        return emails.get(i)!;
      };
      return email;
    };
    const run = (flow: string, a: Side, b: Side) => measure(`${label}: ${flow}`, a, b, mailer?.sends);

    it('sign-up: a registered email answers as a new one', async () => {
      const email = fresh('fresh');
      const result = await run(
        'sign-up',
        { name: 'registered', email: () => registered, send: () => signUp(registered) },
        { name: 'new', email, send: (i) => signUp(email(i)) },
      );
      expectIndistinguishable(result);
      // The registered account was left as it was.
      expect(await t.db.selectFrom('users').select('id').where('email', '=', registered).execute()).toHaveLength(1);
    }, 300_000);

    it('sign-up: an unverified registered email answers as a new one', async () => {
      const email = fresh('fresh');
      const result = await run(
        'sign-up (unverified)',
        { name: 'unverified', email: () => unverified, send: () => signUp(unverified) },
        { name: 'new', email, send: (i) => signUp(email(i)) },
      );
      expectIndistinguishable(result);
    }, 300_000);

    it.skipIf(options.slowMailer)(
      'sign-in: a wrong password answers as an unknown email',
      async () => {
        const email = fresh('nobody');
        const result = await run(
          'sign-in',
          {
            name: 'registered, wrong password',
            email: () => registered,
            send: () => signIn(registered, 'wrong password 123'),
          },
          { name: 'unregistered', email, send: (i) => signIn(email(i), 'wrong password 123') },
        );
        expectIndistinguishable(result);
        expect(result.sides[0]!.status).toEqual([401]);
      },
      300_000,
    );

    it('request-password-reset: a registered email answers as an unregistered one', async () => {
      const email = fresh('nobody');
      const result = await run(
        'password reset',
        { name: 'registered', email: () => registered, send: () => reset(registered) },
        { name: 'unregistered', email, send: (i) => reset(email(i)) },
      );
      expectIndistinguishable(result);
      expect(result.sides[0]!.status).toEqual([200]);
    }, 300_000);
  });
}

/** Logs the measurements of the calling file in one line, once its flows are done. */
export function logSummary() {
  // The module may serve several files in one worker: only the ones measured from here on.
  let first = 0;
  beforeAll(() => {
    first = measurements.length;
  });
  afterAll(() => {
    const summary = measurements.slice(first).map((m) => ({
      flow: m.flow,
      differenceMs: m.differenceMs,
      allowanceMs: m.allowanceMs,
      medians: m.sides.map((side) => side.medianMs),
    }));
    console.log(`[enumeration] summary ${JSON.stringify(summary)}`);
  });
}
