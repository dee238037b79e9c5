import { z } from 'zod';
import { access } from '../auth/access.js';
import { type LibraryRoute, line, text, uuid } from './fields.js';

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
 * API.md "Multi-factor authentication": TOTP with backup codes, and passkeys,
 * served as the plugins serve them, minus what would weaken them: no issuer
 * or method chosen by the client, no trusted devices, no session created by
 * a passkey registration, no extra WebAuthn context.
 */
export const SECOND_FACTOR_ROUTES: readonly LibraryRoute[] = [
  { method: 'POST', path: '/two-factor/enable', access: sensitive, body: password },
  { method: 'POST', path: '/two-factor/get-totp-uri', access: sensitive, body: password },
  // Completes enabling (with a session) or a pending sign-in (with the two_factor cookie).
  // Its refusals commit: the plugin counts them toward the lockout before answering.
  {
    method: 'POST',
    path: '/two-factor/verify-totp',
    access: access.public(),
    body: code,
    transactional: true,
    commitsRefusals: true,
  },
  {
    method: 'POST',
    path: '/two-factor/verify-backup-code',
    access: access.public(),
    body: code,
    transactional: true,
    commitsRefusals: true,
  },
  { method: 'POST', path: '/two-factor/generate-backup-codes', access: sensitive, body: password },
  { method: 'POST', path: '/two-factor/disable', access: sensitive, body: password, transactional: true },

  {
    method: 'GET',
    path: '/passkey/generate-register-options',
    access: sensitive,
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
    access: sensitive,
    body: z.object({ response: credential, name: text(100).optional() }).strict(),
    transactional: true,
  },
  {
    method: 'GET',
    path: '/passkey/generate-authenticate-options',
    access: access.optional(),
    query: z.object({}).strict(),
  },
  {
    method: 'POST',
    path: '/passkey/verify-authentication',
    access: access.public(),
    body: z.object({ response: credential }).strict(),
  },
  { method: 'GET', path: '/passkey/list-user-passkeys', access: session() },
  {
    method: 'POST',
    path: '/passkey/update-passkey',
    access: session(),
    body: z.object({ id: uuid, name: text(100) }).strict(),
  },
  {
    method: 'POST',
    path: '/passkey/delete-passkey',
    access: sensitive,
    body: z.object({ id: uuid }).strict(),
    transactional: true,
  },
];
