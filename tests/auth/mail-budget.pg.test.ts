import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmailMessage, Mailer } from '../../src/auth/email.js';
import { budgetedMailer, recipientKey } from '../../src/auth/mail-budget.js';
import { createMemoryStore } from '../../src/platform/rate-limit-store.js';
import { parseConfig } from '../../src/shared/config.js';
import { createMemoryLogger } from '../../src/shared/logger.js';
import { createTestApp, TEST_SECRET, type TestApp } from '../support/app.js';
import { call, linkIn, mailsTo, pathOf } from '../support/http.js';
import { signedInUser, uniqueEmail } from '../support/users.js';

/**
 * docs/security.md "Mail budgets": per recipient address, at most
 * MAIL_BUDGET_PER_HOUR mails of one kind an hour and MAIL_BUDGET_PER_DAY of
 * all kinds a day, whoever asks and from however many client addresses; a
 * refused mail answers exactly as a sent one, and security notices are never
 * dropped. Everything through HTTP, with the limiter on behind one trusted
 * proxy hop (each request from its own client address, as an attacker with
 * many addresses sends them).
 */
// The auth tier's budget per client address stays out of the way: the helpers sign in without an address of their own.
const ENV = { RATE_LIMIT_ENABLED: 'true', TRUSTED_PROXY_HOPS: '1', RATE_LIMIT_AUTH_LIMIT: '1000' };
const TRIES = 30;
const PER_HOUR = 5;

let ipCount = 0;
/** A client address never used before in this file. */
function nextIp(): string {
  ipCount += 1;
  return `198.51.${Math.floor(ipCount / 250)}.${(ipCount % 250) + 1}`;
}

/** Lets the mails sent after the answers (password reset, the budget's own bookkeeping) finish. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 150));

/** TRIES requests, each from its own address: their statuses and bodies. */
async function flood(t: Pick<TestApp, 'app'>, path: string, body: unknown, tries = TRIES) {
  const answers: string[] = [];
  for (let i = 0; i < tries; i += 1) {
    const response = await call(t, path, { body, ip: nextIp() });
    answers.push(`${response.status} ${await response.text()}`);
  }
  return answers;
}

const warnings = (t: Pick<TestApp, 'logger'>) => t.logger.lines.filter((line) => line.event === 'mail.budget_exceeded');

/** The keyed hash the warning names, computed independently of the service. */
const hashOf = (email: string) =>
  createHmac('sha256', TEST_SECRET).update(`gatehouse mail budget\0${email}`).digest('hex').slice(0, 32);

const resetBody = (t: TestApp, email: string) => ({ email, redirectTo: `${t.config.auth.appUrl}/reset` });

describe('mail budgets per recipient', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: ENV });
  });
  afterAll(() => t?.close());

  it(`password reset: ${TRIES} requests from ${TRIES} addresses mail ${PER_HOUR} times and answer ${TRIES} identical 200s`, async () => {
    const user = await signedInUser(t);
    const answers = await flood(t, '/api/auth/request-password-reset', resetBody(t, user.email));
    await settle();
    expect(new Set(answers).size, answers[0]).toBe(1);
    expect(answers[0]).toMatch(/^200 /);
    expect(mailsTo(t, user.email).filter((mail) => /reset/i.test(mail.subject))).toHaveLength(PER_HOUR);

    // One warning for the address and window, naming a keyed hash, never the address.
    const warned = warnings(t).filter((line) => line.recipient === hashOf(user.email));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn', kind: 'password_reset', window: 'hour' });
    expect(JSON.stringify(t.logger.lines.filter((line) => line.event?.toString().startsWith('mail.')))).not.toContain(
      user.email,
    );
  });

  it('magic link: the same, and another address is unaffected', async () => {
    const email = uniqueEmail('magic');
    const other = uniqueEmail('other');
    const answers = await flood(t, '/api/auth/sign-in/magic-link', { email });
    expect(new Set(answers).size, answers[0]).toBe(1);
    expect(answers[0]).toMatch(/^200 /);
    expect(mailsTo(t, email)).toHaveLength(PER_HOUR);

    expect((await call(t, '/api/auth/sign-in/magic-link', { body: { email: other }, ip: nextIp() })).status).toBe(200);
    expect(mailsTo(t, other)).toHaveLength(1);
    // The last link mailed still signs in: the budget holds back mails, not the flow.
    const verify = await call(t, pathOf(linkIn(mailsTo(t, email).at(-1)!.text)));
    expect(verify.status).toBe(302);
  });

  it('verification: sign-up and resends to one address stop at the budget, answering alike', async () => {
    const email = uniqueEmail('verify');
    const signUp = await call(t, '/api/auth/sign-up/email', {
      body: { email, password: 'correct horse battery staple', name: 'V' },
      ip: nextIp(),
    });
    expect(signUp.status).toBe(200);
    // At once (the library holds each unauthenticated resend to 500 ms): the budget's count is atomic.
    const answers = await Promise.all(
      Array.from({ length: TRIES }, async () => {
        const response = await call(t, '/api/auth/send-verification-email', { body: { email }, ip: nextIp() });
        return `${response.status} ${await response.text()}`;
      }),
    );
    expect([...new Set(answers)], answers.join(' | ')).toHaveLength(1);
    expect(answers[0]).toMatch(/^200 /);
    expect(mailsTo(t, email).filter((mail) => /verify/i.test(mail.subject))).toHaveLength(PER_HOUR);
  });

  it('an unknown address gets nothing, spends nothing, and answers as a known one', async () => {
    const known = await signedInUser(t);
    const unknown = uniqueEmail('unknown');
    const [knownAnswer] = await flood(t, '/api/auth/request-password-reset', resetBody(t, known.email), 1);
    const unknownAnswers = await flood(t, '/api/auth/request-password-reset', resetBody(t, unknown), 10);
    await settle();
    expect(new Set([knownAnswer, ...unknownAnswers]).size).toBe(1);
    expect(mailsTo(t, unknown)).toHaveLength(0);

    // The address then gets an account: its whole reset budget is still there.
    await signedInUser(t, { email: unknown });
    await flood(t, '/api/auth/request-password-reset', resetBody(t, unknown), PER_HOUR + 2);
    await settle();
    expect(mailsTo(t, unknown).filter((mail) => /reset/i.test(mail.subject))).toHaveLength(PER_HOUR);
  });

  it('a security notice is still delivered when the reset budget is spent', async () => {
    const user = await signedInUser(t);
    await flood(t, '/api/auth/request-password-reset', resetBody(t, user.email), PER_HOUR + 3);
    await settle();
    const resets = mailsTo(t, user.email).filter((mail) => /reset/i.test(mail.subject));
    expect(resets).toHaveLength(PER_HOUR);

    const followed = await call(t, pathOf(linkIn(resets.at(-1)!.text)), { ip: nextIp() });
    expect(followed.status).toBe(302);
    const token = new URL(followed.headers.get('location')!).searchParams.get('token');
    const reset = await call(t, '/api/auth/reset-password', {
      body: { newPassword: 'a brand new password 42', token },
      ip: nextIp(),
    });
    expect(reset.status).toBe(200);
    await settle();
    expect(mailsTo(t, user.email).filter((mail) => mail.subject === 'Your password was reset')).toHaveLength(1);
  });
});

describe('the day budget counts every kind together', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { ...ENV, MAIL_BUDGET_PER_DAY: '7' } });
  });
  afterAll(() => t?.close());

  it('5 magic links and 5 resets to one address: 7 mails, then one day warning', async () => {
    const user = await signedInUser(t); // one magic link already
    await flood(t, '/api/auth/sign-in/magic-link', { email: user.email }, PER_HOUR);
    const answers = await flood(t, '/api/auth/request-password-reset', resetBody(t, user.email), PER_HOUR);
    await settle();
    expect(new Set(answers).size).toBe(1);
    const mails = mailsTo(t, user.email);
    expect(mails.filter((mail) => /sign-in link/i.test(mail.subject))).toHaveLength(PER_HOUR);
    expect(mails.filter((mail) => /reset/i.test(mail.subject))).toHaveLength(2);
    const warned = warnings(t).filter((line) => line.recipient === hashOf(user.email));
    expect(warned.map((line) => `${line.kind}/${line.window}`)).toEqual(['magic_link/hour', 'password_reset/day']);
  });
});

describe('two instances on one store and one database share the budget', () => {
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    a = await createTestApp({ env: ENV });
    b = await createTestApp({ env: ENV, database: a.database, store: a.store });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('requests spread over both mail the budget once, and warn once', async () => {
    const email = uniqueEmail('shared');
    const answers: string[] = [];
    for (let i = 0; i < 12; i += 1)
      answers.push(...(await flood(i % 2 ? b : a, '/api/auth/sign-in/magic-link', { email }, 1)));
    expect(new Set(answers).size).toBe(1);
    expect(mailsTo(a, email).length + mailsTo(b, email).length).toBe(PER_HOUR);
    await settle();
    expect([...warnings(a), ...warnings(b)].filter((line) => line.recipient === hashOf(email))).toHaveLength(1);
  });
});

describe('timing: a refused mail takes as long as a sent one', () => {
  const LATENCY_MS = 60;
  let t: TestApp;
  const sent: string[] = [];
  const provider: Mailer = {
    async send(message) {
      await new Promise((resolve) => setTimeout(resolve, LATENCY_MS));
      sent.push(message.to);
    },
  };
  beforeAll(async () => {
    t = await createTestApp({ env: ENV, mailer: provider });
  });
  afterAll(() => t?.close());

  it('magic links over budget still wait about the provider’s time before answering', async () => {
    const email = uniqueEmail('timing');
    const took: number[] = [];
    for (let i = 0; i < PER_HOUR + 5; i += 1) {
      const started = performance.now();
      const response = await call(t, '/api/auth/sign-in/magic-link', { body: { email }, ip: nextIp() });
      took.push(performance.now() - started);
      expect(response.status).toBe(200);
    }
    expect(sent.filter((to) => to === email)).toHaveLength(PER_HOUR);
    // Sent ones wait LATENCY_MS for the provider; refused ones sleep its average, never less.
    for (const ms of took.slice(PER_HOUR)) expect(ms).toBeGreaterThanOrEqual(LATENCY_MS - 5);
  });
});

describe('security notices are coalesced, never dropped', () => {
  const { config } = parseConfig({ NODE_ENV: 'test', AUTH_SECRET: TEST_SECRET });
  const notice = (to: string, n: number): EmailMessage => ({
    to,
    kind: 'security_notice',
    subject: `Notice ${n}`,
    text: `What happened: ${n}`,
    html: `<p>What happened: ${n}</p>`,
  });

  it(`the first ${PER_HOUR} of an hour go one by one; the rest arrive in one digest listing each`, async () => {
    const delivered: EmailMessage[] = [];
    const tasks: Promise<unknown>[] = [];
    const logger = createMemoryLogger();
    const mailer = budgetedMailer(
      { send: async (message) => void delivered.push(message) },
      {
        store: createMemoryStore(),
        config,
        logger,
        background: (task) => void tasks.push(task),
        coalesceMs: 20,
      },
    );
    const to = uniqueEmail('notices');
    for (let n = 1; n <= PER_HOUR + 3; n += 1) await mailer.send(notice(to, n));
    expect(delivered.map((mail) => mail.subject)).toEqual(['Notice 1', 'Notice 2', 'Notice 3', 'Notice 4', 'Notice 5']);
    while (tasks.length) await tasks.shift();
    expect(delivered).toHaveLength(PER_HOUR + 1);
    const digest = delivered.at(-1)!;
    expect(digest.subject).toBe('3 changes were made to your account');
    for (const n of [6, 7, 8]) expect(digest.text).toContain(`What happened: ${n}`);
    expect(logger.lines.filter((line) => line.event === 'mail.budget_exceeded')).toHaveLength(1);
  });

  it('a notice is not held back by other kinds’ budgets, hourly or daily', async () => {
    const delivered: EmailMessage[] = [];
    const mailer = budgetedMailer(
      { send: async (message) => void delivered.push(message) },
      { store: createMemoryStore(), config, logger: createMemoryLogger() },
    );
    const to = uniqueEmail('busy');
    const kinds = ['verification', 'password_reset', 'magic_link', 'account_notice', 'invitation'] as const;
    for (const kind of kinds)
      for (let n = 0; n < PER_HOUR + 1; n += 1) await mailer.send({ ...notice(to, n), kind, subject: kind });
    expect(delivered).toHaveLength(config.email.budget.perDay);
    await mailer.send(notice(to, 99));
    expect(delivered.at(-1)!.subject).toBe('Notice 99');
  });

  it('a send the provider refuses spends nothing; a store that does not answer lets the mail go, with an error log', async () => {
    const delivered: EmailMessage[] = [];
    let refuse = 3;
    const store = createMemoryStore();
    const tasks: Promise<unknown>[] = [];
    const mailer = budgetedMailer(
      {
        send: async (message) => {
          if (refuse-- > 0) throw new Error('provider down');
          delivered.push(message);
        },
      },
      { store, config, logger: createMemoryLogger(), background: (task) => void tasks.push(task) },
    );
    const to = uniqueEmail('refused');
    const reset = { ...notice(to, 0), kind: 'password_reset' as const };
    for (let n = 0; n < 3; n += 1) await expect(mailer.send(reset)).rejects.toThrow('provider down');
    while (tasks.length) await tasks.shift();
    for (let n = 0; n < PER_HOUR + 2; n += 1) await mailer.send(reset);
    expect(delivered).toHaveLength(PER_HOUR);

    const logger = createMemoryLogger();
    const broken = budgetedMailer(
      { send: async (message) => void delivered.push(message) },
      {
        store: { ...store, limit: () => Promise.reject(new Error('store down')) },
        config,
        logger,
      },
    );
    await broken.send({ ...reset, subject: 'through' });
    await broken.send({ ...notice(to, 1), subject: 'notice through' });
    expect(delivered.slice(-2).map((mail) => mail.subject)).toEqual(['through', 'notice through']);
    expect(logger.lines.filter((line) => line.event === 'mail.budget_unavailable')).toHaveLength(2);

    // A notice the provider refuses is tried once, not again as if the store had failed.
    let attempts = 0;
    const failing = budgetedMailer(
      {
        send: async () => {
          attempts += 1;
          throw new Error('provider down');
        },
      },
      { store: createMemoryStore(), config, logger: createMemoryLogger() },
    );
    await expect(failing.send(notice(to, 2))).rejects.toThrow('provider down');
    expect(attempts).toBe(1);
  });

  it('the key is a keyed hash of the canonical address: ASCII case does not buy a new budget', async () => {
    const key = await recipientKey(TEST_SECRET, ' Kate@Example.test');
    expect(key).toBe(await recipientKey(TEST_SECRET, 'kate@example.test'));
    expect(await recipientKey(TEST_SECRET, 'kate+news@example.test')).not.toBe(key);
    expect(key).not.toBe(await recipientKey('another secret', 'kate@example.test'));
    expect(key).toMatch(/^[0-9a-f]{32}$/);
  });
});
