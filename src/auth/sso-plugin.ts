import type { BetterAuthPlugin, GenericEndpointContext } from 'better-auth';
import { APIError, createAuthEndpoint } from 'better-auth/api';
import { expireCookie } from 'better-auth/cookies';
import { runInTransaction } from '../db/ambient.js';
import {
  connectionById,
  domainOwner,
  organizationIdBySlug,
  SSO_FLOW_SECONDS,
  type SsoConnection,
  type SsoFlow,
  signInConnection,
  storeSsoFlow,
  takeSsoFlow,
} from '../db/queries/sso-flows.js';
import { isUuid } from '../shared/text.js';
import { SsoFlowError } from '../sso/errors.js';
import { SsoFetchError } from '../sso/fetch.js';
import { randomToken } from '../sso/oidc.js';
import { canonicalEmail } from './email-address.js';
import { type SsoDeps, ssoContext } from './sso-context.js';
import { canonicalDomain } from './sso-domains.js';
import { completeOidcFlow, startOidc } from './sso-oidc-flow.js';
import { type SsoIdentity, signInThrough } from './sso-provision.js';
import { completeSaml, startSaml } from './sso-saml-flow.js';

/**
 * Enterprise single sign-on's sign-in (docs/sso.md "Sign-in") as endpoints of
 * the auth library, so that the library creates the session (its cookies,
 * its session hooks, the second factor's hold-back) exactly as for its own
 * sign-ins. The service's library rows (src/library/sso-routes.ts) check
 * their input and serve them:
 *
 * - `POST /sign-in/sso`: the organization's oldest enabled connection (by
 *   the verified domain of `email`, or `organizationSlug`), a flow stored
 *   for ten minutes, `{ url }` of the identity provider;
 * - `GET /sso/callback/:connectionId` (OIDC) and `POST
 *   /sso/saml2/callback/:connectionId` (SAML, a form from the IdP's page):
 *   the flow taken once, the answer verified, then the account, membership
 *   and session in one transaction (src/auth/sso-provision.ts). Success
 *   redirects to the flow's callbackURL; any refusal to its errorCallbackURL
 *   (or APP_URL) with `?error=<code>`, having written nothing.
 */

/**
 * OIDC: the state also travels in a signed cookie of the browser that
 * started the sign-in, so a callback URL with someone else's code and state
 * cannot sign this browser in as them (login CSRF, RFC 6749 section 10.12).
 * SAML's response comes as a cross-site POST, which a SameSite=Lax cookie
 * does not accompany: there the AuthnRequest's ID (InResponseTo) binds it.
 */
const STATE_COOKIE = 'sso_state';

type SignInBody = { email?: string; organizationSlug?: string; callbackURL: string; errorCallbackURL?: string };

/** The URL with `error=<code>` added to its query (a relative one stays relative). */
export function withError(target: string, code: string): string {
  const relative = !/^[a-z][a-z0-9+.-]*:/i.test(target);
  const url = new URL(target, 'http://relative.invalid');
  url.searchParams.set('error', code);
  return relative ? `${url.pathname}${url.search}${url.hash}` : url.href;
}

export function ssoPlugin(deps: SsoDeps) {
  const { config, db, clock, logger } = deps;
  const sso = ssoContext(deps);

  const readConnection = (id: string) => runInTransaction(db, (trx) => connectionById(trx, id));

  /**
   * Ends a callback: the flow of `state` (which must be the connection's),
   * the connection enabled, the identity the protocol verifies, the sign-in.
   * Throws the redirect either way (the library answers it with its cookies).
   */
  const complete = async (
    ctx: GenericEndpointContext,
    state: string | undefined,
    verify: (connection: SsoConnection, flow: SsoFlow | null) => Promise<SsoIdentity>,
  ): Promise<never> => {
    const connectionId = String(ctx.params?.connectionId ?? '');
    let errorTarget = config.auth.appUrl;
    let target = config.auth.appUrl;
    try {
      if (!isUuid(connectionId)) throw new SsoFlowError('invalid_request', 'Unknown connection');
      const flow = state ? await takeSsoFlow(db, state, clock()) : null;
      if (flow) {
        errorTarget = flow.errorCallbackURL ?? config.auth.appUrl;
        target = flow.callbackURL;
      }
      if (state && flow?.connectionId !== connectionId)
        throw new SsoFlowError('invalid_state', 'Unknown, expired or used state');
      const connection = await readConnection(connectionId);
      if (!connection) throw new SsoFlowError('invalid_request', 'Unknown connection');
      if (!connection.enabled) throw new SsoFlowError('connection_disabled', 'The connection is disabled');
      const identity = await verify(connection, flow);
      await signInThrough(ctx, db, { connectionId, identity }).catch((error: unknown) => {
        // Two first sign-ins of one person at once: the one that lost the race on a unique key
        // (users' email, the link, the membership) rolled back; again, it finds what the other wrote.
        if ((error as { code?: unknown })?.code !== '23505') throw error;
        return signInThrough(ctx, db, { connectionId, identity });
      });
    } catch (error) {
      const code =
        error instanceof SsoFlowError ? error.code : error instanceof SsoFetchError ? 'idp_error' : undefined;
      if (!code) throw error;
      logger.warn('sso.sign_in_refused', { connectionId, code, reason: error instanceof Error ? error.message : '' });
      throw ctx.redirect(withError(errorTarget, code));
    }
    throw ctx.redirect(target);
  };

  return {
    id: 'gatehouse-sso',
    endpoints: {
      signInSso: createAuthEndpoint('/sign-in/sso', { method: 'POST' }, async (ctx) => {
        const body = ctx.body as SignInBody;
        let organizationId: string | null = null;
        if (body.email) {
          const email = canonicalEmail(body.email);
          const domain = canonicalDomain(email.slice(email.lastIndexOf('@') + 1));
          organizationId = 'domain' in domain ? await domainOwner(db, domain.domain) : null;
        } else if (body.organizationSlug) {
          organizationId = await organizationIdBySlug(db, body.organizationSlug);
        }
        const connection = organizationId ? await signInConnection(db, organizationId) : undefined;
        if (!connection)
          throw APIError.from('NOT_FOUND', {
            code: 'NOT_FOUND',
            message: 'No single sign-on connection serves this organization',
          });
        const state = randomToken();
        const started =
          connection.type === 'oidc'
            ? await startOidc(sso, connection, { state, loginHint: body.email })
            : await startSaml(sso, connection, { state });
        const flow: SsoFlow = {
          connectionId: connection.id,
          callbackURL: body.callbackURL,
          errorCallbackURL: body.errorCallbackURL ?? null,
          ...started.flow,
        };
        await storeSsoFlow(db, state, flow, clock());
        if (connection.type === 'oidc') {
          // The callback comes back to this browser as a top-level GET, which carries the cookie (SameSite=Lax).
          const cookie = ctx.context.createAuthCookie(STATE_COOKIE, { maxAge: SSO_FLOW_SECONDS });
          await ctx.setSignedCookie(cookie.name, state, ctx.context.secret, cookie.attributes);
        }
        return ctx.json({ url: started.url });
      }),
      ssoCallback: createAuthEndpoint('/sso/callback/:connectionId', { method: 'GET' }, async (ctx) => {
        const query = (ctx.query ?? {}) as Record<string, string | undefined>;
        const cookie = ctx.context.createAuthCookie(STATE_COOKIE);
        const started = await ctx.getSignedCookie(cookie.name, ctx.context.secret);
        expireCookie(ctx, cookie);
        return complete(ctx, query.state || undefined, (connection, flow) =>
          completeOidcFlow(sso, connection, flow, { ...query, startedState: started || undefined }),
        );
      }),
      ssoSamlCallback: createAuthEndpoint(
        '/sso/saml2/callback/:connectionId',
        { method: 'POST', metadata: { allowedMediaTypes: ['application/x-www-form-urlencoded'] } },
        async (ctx) => {
          const form = (ctx.body ?? {}) as { SAMLResponse?: string; RelayState?: string };
          return complete(ctx, form.RelayState || undefined, (connection, flow) =>
            completeSaml(sso, connection, flow, form.SAMLResponse),
          );
        },
      ),
    },
  } satisfies BetterAuthPlugin;
}
