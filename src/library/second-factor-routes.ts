import { z } from 'zod';
import { access } from '../auth/access.js';
import { line, text, uuid } from './fields.js';
import type { LibraryRoute } from './row.js';
import {
  addPasskey,
  auditPasskeyRemoved,
  auditTwoFactorDisabled,
  enableTwoFactor,
  findCallersPasskey,
} from './second-factor-calls.js';

const session = access.session;
/** docs/security.md "Sensitive actions and step-up": adds, reveals or removes a way to sign in. */
const sensitive = access.session({ sensitive: true });
const password = z.object({ password: line(1024) }).strict();
/**
 * A code as typed: a malformed one reaches the plugin and counts as a failed
 * attempt, as a wrong one does. `trustDevice` is accepted only as false:
 * a trusted device would skip the second factor on later sign-ins.
 */
const code = z.object({ code: line(64).min(1), trustDevice: z.literal(false).optional() }).strict();
/** A WebAuthn credential as @simplewebauthn/browser serialises it (the body limit bounds its size). */
const credential = z.record(z.string().max(64), z.unknown());

/**
 * Multi-factor authentication (README): TOTP with backup codes, and passkeys,
 * served as the plugins serve them, minus what would weaken them: no issuer
 * or method chosen by the client, no trusted devices, no session created by
 * a passkey registration, no extra WebAuthn context.
 */
export const SECOND_FACTOR_ROUTES: readonly LibraryRoute[] = [
  {
    method: 'POST',
    path: '/two-factor/enable',
    summary: 'Start enabling TOTP: its secret and backup codes (verify-totp completes)',
    access: sensitive,
    tier: 'auth',
    transaction: 'none',
    body: password,
  },
  {
    method: 'POST',
    path: '/two-factor/get-totp-uri',
    summary: "The TOTP secret's otpauth:// URI again",
    access: sensitive,
    tier: 'auth',
    transaction: 'none',
    body: password,
  },
  // Completes enabling (with a session) or a pending sign-in (with the two_factor cookie).
  // Its refusals commit: the plugin counts them toward the lockout before answering.
  {
    method: 'POST',
    path: '/two-factor/verify-totp',
    summary: 'A TOTP code: completes enabling, or a pending sign-in',
    access: access.public(),
    tier: 'auth',
    transaction: 'commit-refusals',
    newSessions: 'second-factor',
    after: enableTwoFactor,
    body: code,
  },
  {
    method: 'POST',
    path: '/two-factor/verify-backup-code',
    summary: 'A backup code: completes a pending sign-in',
    access: access.public(),
    tier: 'auth',
    transaction: 'commit-refusals',
    newSessions: 'second-factor',
    body: code,
  },
  {
    method: 'POST',
    path: '/two-factor/generate-backup-codes',
    summary: 'Replace the backup codes',
    access: sensitive,
    tier: 'auth',
    transaction: 'none',
    body: password,
  },
  {
    method: 'POST',
    path: '/two-factor/disable',
    summary: 'Disable TOTP',
    access: sensitive,
    tier: 'auth',
    transaction: 'rollback-refusals',
    newSessions: 'replacing',
    after: auditTwoFactorDisabled,
    body: password,
  },

  {
    method: 'GET',
    path: '/passkey/generate-register-options',
    summary: 'WebAuthn options to register a passkey',
    access: sensitive,
    tier: 'auth',
    transaction: 'none',
    query: z
      .object({
        authenticatorAttachment: z.enum(['platform', 'cross-platform']).optional(),
        name: text(100).optional(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/passkey/verify-registration',
    summary: 'Register a passkey (ends the other sessions)',
    access: sensitive,
    tier: 'auth',
    transaction: 'rollback-refusals',
    after: addPasskey,
    body: z.object({ response: credential, name: text(100).optional() }).strict(),
  },
  {
    method: 'GET',
    path: '/passkey/generate-authenticate-options',
    summary: 'WebAuthn options to sign in with a passkey',
    access: access.optional(),
    tier: 'auth',
    transaction: 'none',
    query: z.object({}).strict(),
  },
  {
    method: 'POST',
    path: '/passkey/verify-authentication',
    summary: 'Sign in with a passkey',
    access: access.public(),
    tier: 'auth',
    transaction: 'none',
    newSessions: 'passkey',
    body: z.object({ response: credential }).strict(),
  },
  {
    method: 'GET',
    path: '/passkey/list-user-passkeys',
    summary: "The user's passkeys",
    access: session(),
    tier: 'auth',
    transaction: 'none',
  },
  {
    method: 'POST',
    path: '/passkey/update-passkey',
    summary: 'Rename a passkey',
    access: session(),
    tier: 'auth',
    transaction: 'none',
    body: z.object({ id: uuid, name: text(100) }).strict(),
  },
  {
    method: 'POST',
    path: '/passkey/delete-passkey',
    summary: 'Delete a passkey',
    access: sensitive,
    tier: 'auth',
    transaction: 'rollback-refusals',
    before: findCallersPasskey,
    after: auditPasskeyRemoved,
    body: z.object({ id: uuid }).strict(),
  },
];
