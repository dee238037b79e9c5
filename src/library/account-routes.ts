import { z } from 'zod';
import { access } from '../auth/access.js';
import { replyWithSession, replyWithSessions, sessionIdToToken } from './account-calls.js';
import { callback, image, line, providerId, userName, uuid } from './fields.js';
import type { LibraryRoute } from './row.js';
import { endAfterPasswordChange, endAllSessions, endOtherSessions } from './second-factor-calls.js';

const session = access.session;
/** docs/security.md "Sensitive actions and step-up": changes, adds or removes a way to sign in. */
const sensitive = access.session({ sensitive: true });

/** Ending and reading sessions, and the signed-in user's own account and sessions. */
export const ACCOUNT_ROUTES: readonly LibraryRoute[] = [
  // Ending a session needs none that is still valid; reading one answers null without.
  {
    method: 'POST',
    path: '/sign-out',
    summary: 'End the current session',
    access: access.optional(),
    tier: 'global',
    transaction: 'none',
  },
  {
    method: 'GET',
    path: '/get-session',
    summary: 'The current session and its user (null without one)',
    access: access.optional(),
    tier: 'global',
    transaction: 'none',
    keepsCookieCache: true,
    reply: replyWithSession,
  },

  // The signed-in user's own account and sessions.
  {
    method: 'GET',
    path: '/list-sessions',
    summary: "The user's sessions, the current one marked",
    access: session(),
    tier: 'global',
    transaction: 'none',
    reply: replyWithSessions,
  },
  {
    method: 'POST',
    path: '/revoke-session',
    summary: "End one of the user's sessions, by id",
    access: session(),
    tier: 'global',
    transaction: 'none',
    rewrite: sessionIdToToken,
    body: z.object({ id: uuid }).strict(),
  },
  {
    method: 'POST',
    path: '/revoke-sessions',
    summary: 'End every session of the user, the current one too',
    access: session(),
    tier: 'global',
    transaction: 'rollback-refusals',
    after: endAllSessions,
  },
  {
    method: 'POST',
    path: '/revoke-other-sessions',
    summary: 'End every session of the user but the current one',
    access: session(),
    tier: 'global',
    transaction: 'rollback-refusals',
    after: endOtherSessions,
  },
  {
    method: 'POST',
    path: '/update-user',
    summary: "Change the user's name or image",
    access: session(),
    tier: 'global',
    transaction: 'none',
    body: z.object({ name: userName.optional(), image: image.optional() }).strict(),
  },
  {
    method: 'POST',
    path: '/change-password',
    summary: 'Change the password (ends the other sessions)',
    access: sensitive,
    tier: 'auth',
    transaction: 'rollback-refusals',
    newSessions: 'replacing',
    after: endAfterPasswordChange,
    body: z
      .object({ currentPassword: line(1024), newPassword: line(1024), revokeOtherSessions: z.boolean().optional() })
      .strict(),
  },
  {
    method: 'POST',
    path: '/verify-password',
    summary: "Check the user's password",
    access: session(),
    tier: 'auth',
    transaction: 'none',
    body: z.object({ password: line(1024) }).strict(),
    spendsAccountBudget: 'session-user',
  },
  {
    method: 'GET',
    path: '/list-accounts',
    summary: 'The ways the user signs in (password, providers)',
    access: session(),
    tier: 'global',
    transaction: 'none',
  },
  {
    method: 'POST',
    path: '/link-social',
    summary: 'Start linking an OAuth provider to the account',
    access: sensitive,
    tier: 'global',
    transaction: 'none',
    body: z.looseObject({ provider: providerId, callbackURL: callback, errorCallbackURL: callback }),
  },
  {
    method: 'POST',
    path: '/unlink-account',
    summary: 'Unlink a provider from the account',
    access: sensitive,
    tier: 'global',
    transaction: 'none',
    body: z.object({ providerId, accountId: line(255).optional() }).strict(),
  },
];
