/**
 * The library routes' rows are complete and consistent: each carries a
 * summary, a tier and an explicit transaction mode; hooks only with a
 * transaction; the rate limiter's tier of each served path is its row's; and
 * the session marks and transaction modes are declared by exactly the rows
 * that have always had them (a row that loses one fails here, not in an
 * attack).
 */
import { describe, expect, it } from 'vitest';
import { access } from '../../src/auth/access.js';
import { authTierPrefixes, LIBRARY_ROUTES, sessionPathsOf } from '../../src/library/routes.js';
import type { LibraryRoute } from '../../src/library/row.js';
import { findCallersPasskey } from '../../src/library/second-factor-calls.js';
import { rateLimitTiers } from '../../src/middleware/rate-limit.js';
import { LIBRARY_RATE_LIMITS, LIBRARY_SESSION_PATHS } from '../../src/routes/auth.js';

const pathsWhere = (test: (route: LibraryRoute) => boolean) =>
  [...new Set(LIBRARY_ROUTES.filter(test).map((route) => route.path))].sort();
const sorted = (paths: string[]) => [...paths].sort();

describe('library route rows', () => {
  it('each row has a one-line summary, a tier and a transaction mode, and one method and path', () => {
    const seen = new Set<string>();
    for (const route of LIBRARY_ROUTES) {
      const name = `${route.method} ${route.path}`;
      expect(route.summary, name).toMatch(/^\S[^\n]{2,118}$/);
      expect(['auth', 'global'], name).toContain(route.tier);
      expect(['none', 'rollback-refusals', 'commit-refusals'], name).toContain(route.transaction);
      expect(route.path, name).toMatch(/^(\/(?:[a-z0-9-]+|:[a-z][a-zA-Z]*))+$/);
      expect(seen.has(name), `${name} twice`).toBe(false);
      seen.add(name);
    }
    expect(LIBRARY_ROUTES.length).toBeGreaterThan(50);
  });

  it('hooks only on rows with a transaction; a service answer replaces the library and takes nothing else', () => {
    for (const route of LIBRARY_ROUTES) {
      const name = `${route.method} ${route.path}`;
      if (route.before || route.after) expect(route.transaction, name).not.toBe('none');
      if (route.answer) {
        expect(route.transaction, name).toBe('none');
        expect([route.rewrite, route.reply, route.newSessions], name).toEqual([undefined, undefined, undefined]);
      }
      // Named functions: a stack trace, a log and a reader find them.
      for (const fn of [route.before, route.after, route.answer, route.rewrite, route.reply])
        if (fn) expect(fn.name, name).toMatch(/^[a-z]\w+$/i);
    }
    // The type says so too: a hook on a row without a transaction does not compile.
    // @ts-expect-error: `before` on a row whose transaction is 'none'
    const row: LibraryRoute = {
      method: 'POST',
      path: '/x',
      summary: 'x',
      access: access.public(),
      tier: 'global',
      transaction: 'none',
      before: findCallersPasskey,
    };
    expect(row.transaction).toBe('none');
  });

  it('the tier the rate limiter picks for each served path is its row’s, and the auth tier’s paths are unchanged', () => {
    const { tierOf, authPaths, namesAccount } = rateLimitTiers(LIBRARY_RATE_LIMITS);
    for (const route of LIBRARY_ROUTES) {
      const path = `/api/auth${route.path.replace(/:\w+/g, 'x')}`;
      expect(tierOf(path), `${route.method} ${route.path}`).toBe(route.tier);
    }
    expect(LIBRARY_RATE_LIMITS.authPrefixes).toEqual(authTierPrefixes(LIBRARY_ROUTES));
    // The account tier counts password sign-in by the email it names, however the path is spelled.
    for (const path of ['/api/auth/sign-in/email', '/API/Auth//sign-in/email/'])
      expect(namesAccount(path), path).toBe(true);
    expect(namesAccount('/api/auth/verify-password')).toBe(false);
    expect(sorted([...authPaths])).toEqual(
      sorted([
        '/api/auth/sign-in',
        '/api/auth/sign-up',
        '/api/auth/request-password-reset',
        '/api/auth/reset-password',
        '/api/auth/magic-link',
        '/api/auth/change-password',
        '/api/auth/verify-email',
        '/api/auth/send-verification-email',
        '/api/auth/verify-password',
        '/api/auth/two-factor',
        '/api/auth/passkey',
        '/api/users/me/purge',
        '/api/session/step-up',
      ]),
    );
    // Paths the library mounts below an auth-tier segment and the service does not serve: same tier (then 404).
    for (const path of ['/api/auth/sign-in/anonymous', '/api/auth/two-factor/send-otp', '/api/auth/passkey/x'])
      expect(tierOf(path), path).toBe('auth');
    expect(tierOf('/api/auth/sign-inx')).toBe('global');
  });

  it('each class of new sessions is declared by exactly the rows that have always had it', () => {
    const marked = (...kinds: string[]) => pathsWhere((route) => kinds.includes(route.newSessions ?? ''));
    // Multi-factor: a second factor completing a sign-in, or a passkey.
    expect(marked('second-factor', 'passkey')).toEqual(
      sorted(['/two-factor/verify-totp', '/two-factor/verify-backup-code', '/passkey/verify-authentication']),
    );
    expect(marked('second-factor')).toEqual(sorted(['/two-factor/verify-totp', '/two-factor/verify-backup-code']));
    expect(marked('passkey')).toEqual(['/passkey/verify-authentication']);
    expect(marked('replacing')).toEqual(sorted(['/change-password', '/two-factor/disable']));
    expect(marked('held-back')).toEqual(
      sorted(['/magic-link/verify', '/callback/:id', '/sign-in/social', '/verify-email']),
    );
    expect(marked('password')).toEqual(['/sign-in/email']);
    // Single sign-on's callbacks (OIDC redirect, SAML form post): marked as their connection says.
    expect(marked('sso')).toEqual(sorted(['/sso/callback/:connectionId', '/sso/saml2/callback/:connectionId']));
    expect(pathsWhere((route) => route.foreignForm !== undefined)).toEqual(['/sso/saml2/callback/:connectionId']);
    // What the app hands the auth library is what the rows say.
    expect([...LIBRARY_SESSION_PATHS]).toEqual([...sessionPathsOf(LIBRARY_ROUTES)]);
    expect(() =>
      sessionPathsOf([
        { ...LIBRARY_ROUTES[0]!, path: '/p', newSessions: 'password' },
        { ...LIBRARY_ROUTES[0]!, path: '/p', newSessions: 'held-back' },
      ]),
    ).toThrow(/both/);
  });

  it('transactions, refusals that commit and the account budget are where they have always been', () => {
    expect(pathsWhere((route) => route.transaction !== 'none')).toEqual(
      sorted([
        '/reset-password',
        '/revoke-sessions',
        '/revoke-other-sessions',
        '/change-password',
        '/two-factor/verify-totp',
        '/two-factor/verify-backup-code',
        '/two-factor/disable',
        '/passkey/verify-registration',
        '/passkey/delete-passkey',
        '/organization/create',
        '/organization/set-active',
        '/organization/delete',
        '/organization/get-full-organization',
        '/organization/invite-member',
        '/organization/accept-invitation',
        '/organization/remove-member',
        '/organization/leave',
      ]),
    );
    expect(pathsWhere((route) => route.transaction === 'commit-refusals')).toEqual(
      sorted(['/two-factor/verify-totp', '/two-factor/verify-backup-code']),
    );
    expect(pathsWhere((route) => route.spendsAccountBudget === 'session-user')).toEqual(['/verify-password']);
    expect(pathsWhere((route) => route.spendsAccountBudget === 'named-account')).toEqual(['/sign-in/email']);
    for (const route of LIBRARY_ROUTES.filter((row) => row.spendsAccountBudget === 'named-account'))
      expect(route.method, route.path).toBe('POST');
    expect(pathsWhere((route) => route.answer !== undefined)).toEqual(
      sorted(['/organization/has-permission', '/organization/get-active-member-role']),
    );
  });
});
