import type { BetterAuthOptions, BetterAuthPlugin } from 'better-auth';
import { APIError, createAuthMiddleware, isAPIError } from 'better-auth/api';
import type { Kysely } from 'kysely';
import { recordAudit } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { completeLibraryProof } from '../db/queries/email-proof.js';
import { userAddress } from '../db/queries/user-address.js';
import { clientIpFromForwardedFor } from '../shared/client-address.js';
import type { Config } from '../shared/config.js';
import type { Mailer } from './email.js';
import { keepsItsCase } from './email-address.js';
import { type NoticeOrigin, notifySecurityEvent, type SecurityEvent } from './security-notices.js';

/**
 * docs/security.md "Account linking" and "Security notices", wired into the
 * auth library:
 *
 * - `validateUserInfo`: an OAuth sign-in, sign-up or link goes ahead only
 *   for an address the provider asserts as verified, in a form the library's
 *   lower-casing keeps (else `?error=email_not_verified`);
 * - database hooks: a provider identity linked to an existing account is
 *   audited `user.account_linked`, and two-factor turned on or off is noted;
 * - one after hook: the notices of the call are mailed after the response,
 *   only for a call that succeeded (a link, once written, is reported
 *   whatever follows it).
 */

type HookContext = Parameters<Parameters<typeof createAuthMiddleware>[0]>[0];
type ValidateUserInfo = NonNullable<NonNullable<BetterAuthOptions['user']>['validateUserInfo']>;

/** The callback's error code for an address the provider did not assert (better-auth's own OAuth error code). */
export const EMAIL_NOT_VERIFIED = 'email_not_verified';

/**
 * The address a provider asserted, as it sent it: GitHub's profile `email`
 * (the library fills it from /user/emails and takes `verified` from there),
 * Google's ID token `email` claim. The library lower-cases the copy it acts on.
 */
function assertedAddress(profile: Record<string, unknown> | undefined, fallback: unknown): unknown {
  return typeof profile?.email === 'string' ? profile.email : fallback;
}

export const providerEmailPolicy: ValidateUserInfo = ({ user, source }) => {
  if (source.method !== 'oauth') return;
  const asserted = assertedAddress(source.oauth?.profile, user.email);
  if (user.emailVerified === true && typeof asserted === 'string' && keepsItsCase(asserted)) return;
  return {
    error: EMAIL_NOT_VERIFIED,
    errorDescription: 'The provider did not assert this address as verified',
  };
};

/** What the after hook mails for a call that succeeded, with the account each notice goes to. */
type Pending = { userId: string; email: string | null; event: SecurityEvent; always?: boolean }[];

/** Per library call (the endpoint, its hooks and its database hooks share `ctx.context`). */
const pendingByCall = new WeakMap<object, Pending>();
const usersCreatedByCall = new WeakMap<object, Set<string>>();
const twoFactorChangeByCall = new WeakMap<object, boolean>();
const provenByCall = new WeakSet<object>();

function pending(context: object): Pending {
  const list = pendingByCall.get(context) ?? [];
  pendingByCall.set(context, list);
  return list;
}

/** Notices from a session's own call, sent when the call succeeded. */
const SESSION_EVENTS: Readonly<Record<string, (returned: Record<string, unknown>) => SecurityEvent>> = {
  '/passkey/verify-registration': (returned) => ({
    kind: 'passkey_added',
    passkeyName: typeof returned.name === 'string' ? returned.name : null,
  }),
  '/passkey/delete-passkey': () => ({ kind: 'passkey_removed' }),
  '/two-factor/generate-backup-codes': () => ({ kind: 'backup_codes_regenerated' }),
  '/change-password': () => ({ kind: 'password_changed' }),
};

/** The client as the service saw it: the address its trusted proxies forwarded (as the rate limiter reads it) and its user agent. */
export function originOf(request: Request | undefined, config: Config, at = new Date()): NoticeOrigin {
  const headers = request?.headers;
  return {
    at,
    ip: clientIpFromForwardedFor(headers?.get('x-forwarded-for') ?? undefined, config.rateLimit.trustedProxyHops),
    userAgent: headers?.get('user-agent') ?? null,
  };
}

interface Deps {
  config: Config;
  db: Kysely<Database>;
  mailer: Mailer;
  background: (task: Promise<unknown>) => void;
}

export function accountEvents({ config, db, mailer, background }: Deps) {
  const notify = (to: string, event: SecurityEvent, origin: NoticeOrigin) =>
    background(notifySecurityEvent(mailer, { to, event, origin, appUrl: config.auth.appUrl }));

  const addressOf = (userId: string) => userAddress(db, userId);

  const databaseHooks = {
    user: {
      create: {
        after: async (user: { id: string }, ctx: { context: object } | null) => {
          if (!ctx) return;
          const created = usersCreatedByCall.get(ctx.context) ?? new Set<string>();
          usersCreatedByCall.set(ctx.context, created.add(user.id));
        },
      },
      update: {
        before: async (data: Record<string, unknown>, ctx: { context: object; path?: string } | null) => {
          if (ctx && typeof data.twoFactorEnabled === 'boolean')
            twoFactorChangeByCall.set(ctx.context, data.twoFactorEnabled);
          // The magic link verifies an unverified account's address in this one update.
          if (ctx?.path === '/magic-link/verify' && data.emailVerified === true) provenByCall.add(ctx.context);
        },
        after: async (user: { id: string; email: string } | null, ctx: { context: object } | null) => {
          if (!ctx || !user) return;
          if (provenByCall.has(ctx.context)) {
            provenByCall.delete(ctx.context);
            await completeLibraryProof(db, user.id);
          }
          const enabled = twoFactorChangeByCall.get(ctx.context);
          if (enabled === undefined) return;
          twoFactorChangeByCall.delete(ctx.context);
          pending(ctx.context).push({
            userId: user.id,
            email: user.email,
            event: { kind: enabled ? 'two_factor_enabled' : 'two_factor_disabled' },
          });
        },
      },
    },
    account: {
      create: {
        /**
         * A provider identity added to an account that existed before this
         * call is a link, whichever path wrote it (the OAuth callback of a
         * sign-in or of `/link-social`, an ID-token sign-in); an account
         * created by this call is a sign-up. Audited here, when the link is
         * written; mailed by the after hook.
         */
        after: async (
          account: { userId: string; providerId: string; accountId: string },
          ctx: { context: object; path?: string } | null,
        ) => {
          if (!ctx?.path || account.providerId === 'credential') return;
          if (usersCreatedByCall.get(ctx.context)?.has(account.userId)) return;
          await recordAudit(db, {
            action: 'user.account_linked',
            actorId: account.userId,
            organizationId: null,
            metadata: { userId: account.userId, providerId: account.providerId, providerAccountId: account.accountId },
          });
          pending(ctx.context).push({
            userId: account.userId,
            email: null,
            event: { kind: 'account_linked', providerId: account.providerId },
            always: true,
          });
        },
      },
    },
  } satisfies BetterAuthOptions['databaseHooks'];

  const after = createAuthMiddleware(async (ctx: HookContext) => {
    const returned = ctx.context.returned;
    const redirect = isAPIError(returned) && returned.statusCode === 302;
    const location = redirect ? (ctx.context.responseHeaders?.get('location') ?? null) : null;
    if (ctx.path === '/callback/:id' && location) sendRefusalToApp(ctx, location, config.auth.appUrl);

    const failed =
      (isAPIError(returned) && !redirect) ||
      (location !== null && new URL(location, 'http://x').searchParams.has('error'));
    const list = [...(pendingByCall.get(ctx.context) ?? [])];
    pendingByCall.delete(ctx.context);
    const event = SESSION_EVENTS[ctx.path];
    const user = ctx.context.session?.user;
    if (event && user && !failed)
      list.push({ userId: user.id, email: user.email, event: event((returned ?? {}) as Record<string, unknown>) });
    if (list.length === 0) return;
    const origin = originOf(ctx.request, config);
    for (const notice of list) {
      if (failed && !notice.always) continue;
      const to = notice.email ?? (await addressOf(notice.userId));
      if (to) notify(to, notice.event, origin);
    }
  });

  /** `/link-social` with an ID token links without `validateUserInfo`: only the redirect flow links. */
  const refuseIdTokenLink = createAuthMiddleware(async () => {
    throw APIError.from('BAD_REQUEST', {
      code: 'ID_TOKEN_LINKING_DISABLED',
      message: 'Link a provider through its sign-in page (callbackURL), not with an ID token',
    });
  });

  return {
    validateUserInfo: providerEmailPolicy,
    /**
     * A plugin: its database hooks are an entry of their own beside the
     * service's `databaseHooks`, and its after hook runs after the service's
     * own `hooks.after` (src/auth/second-factor.ts).
     */
    plugin: {
      id: 'gatehouse-account-events',
      init: () => ({ options: { databaseHooks } }),
      hooks: {
        before: [
          {
            matcher: (ctx) =>
              ctx.path === '/link-social' && Boolean((ctx.body as { idToken?: unknown } | undefined)?.idToken),
            handler: refuseIdTokenLink,
          },
        ],
        after: [{ matcher: () => true, handler: after }],
      },
    } satisfies BetterAuthPlugin,
    /** The password-reset notice (the library names the user only to its own callback). */
    passwordReset: (user: { email: string }, request: Request | undefined) =>
      notify(user.email, { kind: 'password_reset' }, originOf(request, config)),
  };
}

/**
 * docs/security.md "Account linking": an address the provider did not assert
 * sends the browser to the `errorCallbackURL` it named, else to the app
 * (APP_URL), never to the library's own error page.
 */
function sendRefusalToApp(ctx: HookContext, location: string, appUrl: string): void {
  const url = new URL(location, ctx.context.baseURL);
  if (url.searchParams.get('error') !== EMAIL_NOT_VERIFIED) return;
  if (`${url.origin}${url.pathname}` !== `${ctx.context.baseURL}/error`) return;
  const target = new URL(appUrl);
  target.searchParams.set('error', EMAIL_NOT_VERIFIED);
  ctx.setHeader('location', target.toString());
}
