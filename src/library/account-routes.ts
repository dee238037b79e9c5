import { z } from 'zod';
import { access } from '../auth/access.js';
import { callback, email, image, type LibraryRoute, line, providerId, userName, uuid } from './fields.js';

const session = access.session;
/** docs/security.md "Sensitive actions and step-up": changes, adds or removes a way to sign in. */
const sensitive = access.session({ sensitive: true });

/** Sign-up, sign-in, the flows without a session, and the signed-in user's own account and sessions. */
export const ACCOUNT_ROUTES: readonly LibraryRoute[] = [
  // Sign-up, sign-in and the flows that start without a session (spec §5 Flows).
  {
    method: 'POST',
    path: '/sign-up/email',
    access: access.public(),
    body: z
      .object({
        email,
        password: line(1024),
        name: userName,
        image: image.optional(),
        callbackURL: callback,
        rememberMe: z.boolean().optional(),
      })
      .strict(),
  },
  {
    method: 'POST',
    path: '/sign-in/email',
    access: access.public(),
    body: z.looseObject({ email, password: line(1024), callbackURL: callback, rememberMe: z.boolean().optional() }),
  },
  {
    method: 'POST',
    path: '/sign-in/social',
    access: access.public(),
    body: z.looseObject({
      provider: providerId,
      callbackURL: callback,
      errorCallbackURL: callback,
      newUserCallbackURL: callback,
      disableRedirect: z.boolean().optional(),
    }),
  },
  { method: 'GET', path: '/callback/:id', access: access.public() },
  { method: 'POST', path: '/callback/:id', access: access.public() },
  {
    method: 'POST',
    path: '/sign-in/magic-link',
    access: access.public(),
    body: z.looseObject({
      email,
      name: userName.optional(),
      callbackURL: callback,
      newUserCallbackURL: callback,
      errorCallbackURL: callback,
    }),
  },
  { method: 'GET', path: '/magic-link/verify', access: access.public() },
  { method: 'GET', path: '/verify-email', access: access.public() },
  {
    method: 'POST',
    path: '/send-verification-email',
    access: access.public(),
    body: z.looseObject({ email, callbackURL: callback }),
  },
  {
    method: 'POST',
    path: '/request-password-reset',
    access: access.public(),
    body: z.looseObject({ email, redirectTo: callback }),
  },
  {
    method: 'POST',
    path: '/reset-password',
    access: access.public(),
    transactional: true,
    body: z.looseObject({ newPassword: line(1024), token: line(512).optional() }),
  },
  { method: 'GET', path: '/reset-password/:token', access: access.public() },
  { method: 'GET', path: '/error', access: access.public() },
  { method: 'GET', path: '/ok', access: access.public() },
  // Ending a session needs none that is still valid; reading one answers null without.
  { method: 'POST', path: '/sign-out', access: access.optional() },
  { method: 'GET', path: '/get-session', access: access.optional() },

  // The signed-in user's own account and sessions.
  { method: 'GET', path: '/list-sessions', access: session() },
  { method: 'POST', path: '/revoke-session', access: session(), body: z.object({ id: uuid }).strict() },
  { method: 'POST', path: '/revoke-sessions', access: session(), transactional: true },
  { method: 'POST', path: '/revoke-other-sessions', access: session(), transactional: true },
  {
    method: 'POST',
    path: '/update-user',
    access: session(),
    body: z.object({ name: userName.optional(), image: image.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/change-password',
    access: sensitive,
    transactional: true,
    body: z
      .object({ currentPassword: line(1024), newPassword: line(1024), revokeOtherSessions: z.boolean().optional() })
      .strict(),
  },
  {
    method: 'POST',
    path: '/verify-password',
    access: session(),
    body: z.object({ password: line(1024) }).strict(),
    spendsAccountBudget: true,
  },
  { method: 'GET', path: '/list-accounts', access: session() },
  {
    method: 'POST',
    path: '/link-social',
    access: sensitive,
    body: z.looseObject({ provider: providerId, callbackURL: callback, errorCallbackURL: callback }),
  },
  {
    method: 'POST',
    path: '/unlink-account',
    access: sensitive,
    body: z.object({ providerId, accountId: line(255).optional() }).strict(),
  },
];
