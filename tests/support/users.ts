import { expect } from 'vitest';
import { hashPassword } from '../../src/auth/password.js';
import type { TestApp } from './app.js';
import { CookieJar, call, linkIn, mailsTo, PASSWORD, pathOf } from './http.js';

let counter = 0;

export function uniqueEmail(label = 'user'): string {
  counter += 1;
  return `${label}-${counter}-${crypto.randomUUID().slice(0, 8)}@example.test`;
}

export { PASSWORD };

let storedPassword: Promise<string> | undefined;

/**
 * PASSWORD as the sign-up hook stores it (`<salt hex>:<key hex>`), hashed once
 * per process: the salt travels in the value, so one hash serves every seeded
 * account.
 */
function passwordHash(): Promise<string> {
  storedPassword ??= hashPassword(PASSWORD);
  return storedPassword;
}

/** Signs in through the library's route: a jar holding a live session (both cookies, as a browser gets them). */
async function signIn(t: TestApp, email: string): Promise<{ id: string; jar: CookieJar }> {
  const jar = new CookieJar();
  const signIn = await call(t, '/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar });
  expect(signIn.status).toBe(200);
  const { user } = (await signIn.json()) as { user: { id: string } };
  return { id: user.id, jar };
}

/**
 * Signs in with a mailed magic link, through the library's routes: a jar
 * holding a live session (both cookies, as a browser gets them). The same
 * session a password sign-in creates, without its scrypt derivation.
 */
async function signInByLink(t: TestApp, email: string): Promise<CookieJar> {
  expect((await call(t, '/api/auth/sign-in/magic-link', { body: { email } })).status).toBe(200);
  const mail = mailsTo(t, email).at(-1);
  if (!mail) throw new Error(`no sign-in mail for ${email}`);
  const jar = new CookieJar();
  const verify = await call(t, pathOf(linkIn(mail.text)), { jar });
  expect(verify.status).toBe(302);
  return jar;
}

/**
 * A verified account with PASSWORD, written straight into the tables as a
 * completed sign-up leaves it (a `users` row, email lower-cased and verified,
 * and its `credential` account), then signed in through the library's
 * magic link, its session fresh for sensitive actions. For every test whose subject is not sign-up, verification or
 * password sign-in; those use `signedUpUser` (a later password sign-in works
 * on either).
 */
export async function signedInUser(t: TestApp, options: { email?: string; name?: string } = {}) {
  const email = (options.email ?? uniqueEmail()).toLowerCase();
  const name = options.name ?? 'Test User';
  const password = await passwordHash();
  const id = await t.database.withOwner(async (owner) => {
    const user = await owner
      .insertInto('users')
      .values({ name, email, email_verified: true })
      .returning('id')
      .executeTakeFirstOrThrow();
    await owner
      .insertInto('accounts')
      .values({ user_id: user.id, account_id: user.id, provider_id: 'credential', password })
      .execute();
    return user.id as string;
  });
  const jar = await signInByLink(t, email);
  // Fresh for sensitive actions, as the password sign-in it stands for would
  // leave it (a magic link alone does not prove an account's password):
  // step_up_at by the app's clock, which the guard reads.
  await t.database.withOwner((owner) =>
    owner.updateTable('sessions').set({ step_up_at: t.clock() }).where('user_id', '=', id).execute(),
  );
  return { email, name, id, jar };
}

/** Signs up, follows the verification link from the captured mail, and signs in: the whole flow, through HTTP. */
export async function signedUpUser(t: TestApp, options: { email?: string; name?: string } = {}) {
  const email = options.email ?? uniqueEmail();
  const name = options.name ?? 'Test User';
  const signUp = await call(t, '/api/auth/sign-up/email', { body: { email, password: PASSWORD, name } });
  expect(signUp.status).toBe(200);
  const mail = mailsTo(t, email).at(-1);
  if (!mail) throw new Error(`no verification mail for ${email}`);
  const verify = await call(t, pathOf(linkIn(mail.text)));
  expect([200, 302]).toContain(verify.status);
  const { id, jar } = await signIn(t, email);
  return { email, name, id, jar };
}

export type SignedInUser = Awaited<ReturnType<typeof signedInUser>>;
