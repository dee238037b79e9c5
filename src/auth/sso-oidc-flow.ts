import type { SsoConnection, SsoFlow } from '../db/queries/sso-flows.js';
import { SsoFlowError } from '../sso/errors.js';
import { authorizationUrl, completeOidc, newPkce, type OidcProviderMetadata, randomToken } from '../sso/oidc.js';
import { safeEqual } from './api-key-material.js';
import type { SsoContext } from './sso-context.js';
import type { SsoIdentity } from './sso-provision.js';

/** An OpenID Connect connection's half of single sign-on (src/auth/sso-plugin.ts; the protocol: src/sso/oidc.ts). */

const DEFAULT_SCOPES = ['openid', 'email', 'profile'];

function configured(connection: SsoConnection) {
  const { oidc_metadata: meta, oidc_client_id: clientId, oidc_client_secret: sealed } = connection;
  if (connection.type !== 'oidc' || !meta || !clientId || !sealed)
    throw new SsoFlowError('invalid_request', 'The connection is not an OIDC connection');
  return { meta: meta as OidcProviderMetadata, clientId, sealed };
}

/** The provider's authorization URL, and what the callback needs (PKCE verifier, nonce). */
export async function startOidc(
  sso: SsoContext,
  connection: SsoConnection,
  { state, loginHint }: { state: string; loginHint?: string },
): Promise<{ url: string; flow: Pick<SsoFlow, 'codeVerifier' | 'nonce'> }> {
  const { meta, clientId } = configured(connection);
  const { verifier, challenge } = await newPkce();
  const nonce = randomToken();
  const url = authorizationUrl(meta, {
    clientId,
    redirectUri: sso.redirectUri(connection.id),
    scopes: connection.oidc_scopes?.length ? connection.oidc_scopes : DEFAULT_SCOPES,
    state,
    nonce,
    codeChallenge: challenge,
    loginHint,
  });
  return { url, flow: { codeVerifier: verifier, nonce } };
}

/** The callback's code exchanged and its ID token verified against the flow: who signed in. */
export async function completeOidcFlow(
  sso: SsoContext,
  connection: SsoConnection,
  flow: SsoFlow | null,
  /** The callback's query, and the state this browser's cookie says it started (src/auth/sso-plugin.ts). */
  query: Record<string, string | undefined> & { startedState?: string },
): Promise<SsoIdentity> {
  if (!flow || !query.state) throw new SsoFlowError('invalid_state', 'The callback carries no state');
  if (!query.startedState || !safeEqual(query.startedState, query.state))
    throw new SsoFlowError('invalid_state', 'The sign-in was started in another browser');
  // RFC 6749 section 4.1.2.1: the provider refused (the person cancelled, or the client is not allowed).
  if (query.error) throw new SsoFlowError('idp_error', 'The identity provider refused the sign-in');
  if (!query.code || !flow.codeVerifier || !flow.nonce)
    throw new SsoFlowError('invalid_request', 'The callback carries no code');
  const { meta, clientId, sealed } = configured(connection);
  const identity = await completeOidc({
    meta,
    clientId,
    clientSecret: await sso.openSecret(sealed),
    redirectUri: sso.redirectUri(connection.id),
    code: query.code,
    codeVerifier: flow.codeVerifier,
    nonce: flow.nonce,
    policy: sso.policy,
    now: sso.clock(),
  });
  return { subject: identity.subject, email: identity.email, name: identity.name, claims: identity.claims };
}
