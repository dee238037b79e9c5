import * as OTPAuth from 'otpauth';
import { expect } from 'vitest';
import type { TestApp } from './app.js';
import { CookieJar, call, PASSWORD } from './http.js';

/**
 * Codes come from a real TOTP implementation (otpauth) reading the
 * `totpURI` the service answered, never from the service's own code.
 */
export interface Authenticator {
  totp: OTPAuth.TOTP;
  /** The last time step a code was taken from: the service accepts each step once. */
  lastStep: number;
}

export function authenticatorFor(totpURI: string): Authenticator {
  const parsed = OTPAuth.URI.parse(totpURI);
  if (!(parsed instanceof OTPAuth.TOTP)) throw new Error('not a TOTP URI');
  return { totp: parsed, lastStep: Number.NEGATIVE_INFINITY };
}

const PERIOD_MS = 30_000;
const stepAt = (time: number) => Math.floor(time / PERIOD_MS);

/**
 * A code the service has not accepted yet: the service takes the steps
 * t-1, t and t+1 (RFC 6238 window 1), each once; when all three are spent,
 * wait for the next step.
 */
export async function freshCode(authenticator: Authenticator): Promise<string> {
  for (;;) {
    const time = Date.now();
    const now = stepAt(time);
    // The step before this one is accepted only until this step ends: near its end (a loaded machine
    // may take seconds to send the code), take this step instead.
    const oldest = PERIOD_MS - (time % PERIOD_MS) < 10_000 ? now : now - 1;
    const step = Math.max(oldest, authenticator.lastStep + 1);
    if (step <= now + 1) {
      authenticator.lastStep = step;
      return authenticator.totp.generate({ timestamp: step * PERIOD_MS });
    }
    await new Promise((resolve) => setTimeout(resolve, (now + 1) * PERIOD_MS - Date.now() + 50));
  }
}

/** A code that is certainly wrong now (none of the accepted steps produces it). */
export function wrongCode(authenticator: Authenticator): string {
  const now = stepAt(Date.now());
  const taken = new Set([now - 1, now, now + 1].map((s) => authenticator.totp.generate({ timestamp: s * PERIOD_MS })));
  for (let n = 0; ; n++) {
    const candidate = String(n).padStart(6, '0');
    if (!taken.has(candidate)) return candidate;
  }
}

export interface TwoFactorUser {
  authenticator: Authenticator;
  backupCodes: string[];
  totpURI: string;
}

/** Enables TOTP for a signed-in user: enable with the password, then the first code. The jar gets the new session. */
export async function enableTotp(t: TestApp, jar: CookieJar): Promise<TwoFactorUser> {
  const enable = await call(t, '/api/auth/two-factor/enable', { body: { password: PASSWORD }, jar });
  expect(enable.status).toBe(200);
  const { totpURI, backupCodes } = (await enable.json()) as { totpURI: string; backupCodes: string[] };
  const authenticator = authenticatorFor(totpURI);
  const verify = await call(t, '/api/auth/two-factor/verify-totp', {
    body: { code: await freshCode(authenticator) },
    jar,
  });
  expect(verify.status).toBe(200);
  return { authenticator, backupCodes, totpURI };
}

/** A password sign-in that stops at the second factor: the jar holds only the pending sign-in's cookie. */
export async function pendingSignIn(t: TestApp, email: string, ip?: string): Promise<CookieJar> {
  const jar = new CookieJar();
  const res = await call(t, '/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar, ip });
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ twoFactorRedirect: true });
  return jar;
}

/** Completes a pending sign-in with a fresh code. */
export async function completeWithTotp(t: TestApp, jar: CookieJar, authenticator: Authenticator): Promise<void> {
  const res = await call(t, '/api/auth/two-factor/verify-totp', {
    body: { code: await freshCode(authenticator) },
    jar,
  });
  expect(res.status).toBe(200);
}
