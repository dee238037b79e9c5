import { expect } from 'vitest';
import type { TestApp } from './app.js';
import { CookieJar, call, linkIn, mailsTo, PASSWORD, pathOf } from './http.js';

let counter = 0;

export function uniqueEmail(label = 'user'): string {
  counter += 1;
  return `${label}-${counter}-${crypto.randomUUID().slice(0, 8)}@example.test`;
}

export { PASSWORD };

/** Signs up, follows the verification link from the captured mail, and signs in: a jar holding a live session. */
export async function signedInUser(t: TestApp, options: { email?: string; name?: string } = {}) {
  const email = options.email ?? uniqueEmail();
  const name = options.name ?? 'Test User';
  const signUp = await call(t, '/api/auth/sign-up/email', { body: { email, password: PASSWORD, name } });
  expect(signUp.status).toBe(200);
  const mail = mailsTo(t, email).at(-1);
  if (!mail) throw new Error(`no verification mail for ${email}`);
  const verify = await call(t, pathOf(linkIn(mail.text)));
  expect([200, 302]).toContain(verify.status);
  const jar = new CookieJar();
  const signIn = await call(t, '/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar });
  expect(signIn.status).toBe(200);
  const { user } = (await signIn.json()) as { user: { id: string } };
  return { email, name, id: user.id, jar };
}

export type SignedInUser = Awaited<ReturnType<typeof signedInUser>>;
