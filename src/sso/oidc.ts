/**
 * Signing in through an OpenID Connect provider (docs/sso.md "Sign-in"): the
 * discovery of its endpoints when a connection is configured, the
 * authorization request (code flow, PKCE S256 per RFC 7636, `state` and
 * `nonce`), and the callback's code exchange and ID token checks. No HTTP
 * framework and no database: the caller keeps the flow state and decides what
 * the claims allow. Every request to the provider goes through the SSO fetch
 * policy (src/sso/fetch.ts).
 */
import type { OidcMetadata } from '../db/sso-tables.js';
import { SsoConfigError, SsoFlowError } from './errors.js';
import { checkedFetchJson, checkSsoUrl, SsoFetchError, type SsoFetchPolicy } from './fetch.js';
import { verifyIdToken } from './oidc-id-token.js';

export { CLOCK_TOLERANCE_SECONDS, ID_TOKEN_ALGORITHMS } from './oidc-id-token.js';
export { type AuthorizationRequest, authorizationUrl, base64url, newPkce, randomToken } from './oidc-request.js';

/** The endpoints a connection keeps (stored as discovered; userinfo when the provider has one). */
export interface OidcProviderMetadata extends OidcMetadata {
  userinfo_endpoint?: string;
}

const ENDPOINTS = ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const;

/**
 * The provider's metadata (OpenID Connect Discovery 1.0): its document at
 * `<issuer>/.well-known/openid-configuration` must name exactly this issuer,
 * and every endpoint must pass the same address rules as the issuer. Throws
 * SsoConfigError('issuer').
 */
export async function discoverOidc(issuer: string, policy: SsoFetchPolicy): Promise<OidcProviderMetadata> {
  const refuse = (message: string) => new SsoConfigError('issuer', message);
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw refuse('must be an absolute URL');
  }
  if (url.search || url.hash || issuer.includes('#') || issuer.endsWith('?'))
    throw refuse('must have no query or fragment');
  // Discovery section 4: a path's terminating slash is removed before the well-known suffix.
  const where = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
  let answer: { status: number; body: unknown };
  try {
    answer = await checkedFetchJson(where, policy);
  } catch (error) {
    throw refuse(error instanceof SsoFetchError ? error.message : 'discovery failed');
  }
  if (answer.status !== 200) throw refuse(`discovery document answered ${answer.status}`);
  const doc = answer.body as Record<string, unknown> | null;
  if (typeof doc !== 'object' || doc === null) throw refuse('discovery document is not a JSON object');
  if (doc.issuer !== issuer) throw refuse('discovery document names another issuer');
  const meta: OidcProviderMetadata = { issuer, authorization_endpoint: '', token_endpoint: '', jwks_uri: '' };
  for (const name of ENDPOINTS) meta[name] = await endpoint(doc[name], name, policy);
  if (doc.userinfo_endpoint !== undefined)
    meta.userinfo_endpoint = await endpoint(doc.userinfo_endpoint, 'userinfo_endpoint', policy);
  return meta;
}

async function endpoint(value: unknown, name: string, policy: SsoFetchPolicy): Promise<string> {
  if (typeof value !== 'string') throw new SsoConfigError('issuer', `discovery document has no ${name}`);
  try {
    return (await checkSsoUrl(value, policy)).href;
  } catch (error) {
    throw new SsoConfigError('issuer', `${name}: ${error instanceof SsoFetchError ? error.message : 'refused'}`);
  }
}

export interface OidcCallback {
  meta: OidcProviderMetadata;
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  /** The `code` of the callback; its `state` was matched to the flow by the caller. */
  code: string;
  codeVerifier: string;
  nonce: string;
  policy: SsoFetchPolicy;
  /** The time the token's `exp`, `nbf` and `iat` are checked against (60 seconds either way). */
  now?: Date;
}

export interface OidcIdentity {
  subject: string;
  /** Trimmed, lower case. */
  email: string;
  /** As the provider says; the caller decides (a verified domain is what links an account). */
  emailVerified: boolean | undefined;
  name?: string;
  /** The ID token's claims (and the userinfo's where the token has no email), for role mappings. */
  claims: Record<string, unknown>;
}

/** Only a short, plain error code of the provider goes into a message (its description is free text). */
const providerCode = (body: unknown) => {
  const code = (body as { error?: unknown } | null)?.error;
  return typeof code === 'string' && /^[\w.-]{1,64}$/.test(code) ? `: ${code}` : '';
};

/** RFC 6749 section 2.3.1: client id and secret are form-urlencoded before they are joined for Basic. */
const formEncode = (value: string) => new URLSearchParams({ v: value }).toString().slice(2);

async function request(
  url: string,
  policy: SsoFetchPolicy,
  init: Parameters<typeof checkedFetchJson>[2],
  what: string,
) {
  try {
    return await checkedFetchJson(url, policy, init);
  } catch (error) {
    throw new SsoFlowError('idp_error', `${what}: ${error instanceof SsoFetchError ? error.message : 'failed'}`);
  }
}

/**
 * The callback of a sign-in: the code exchanged at the token endpoint
 * (client_secret_basic, the PKCE verifier), the ID token checked
 * (src/sso/oidc-id-token.ts), the email read from it (from the userinfo
 * endpoint when the token has none; its `sub` must be the token's). Throws
 * SsoFlowError: 'idp_error' when the provider refuses or fails,
 * 'invalid_response' when its answer does not hold. The messages never hold
 * the secret, the code or a token.
 */
export async function completeOidc(callback: OidcCallback): Promise<OidcIdentity> {
  const { meta, policy } = callback;
  const basic = btoa(`${formEncode(callback.clientId)}:${formEncode(callback.clientSecret)}`);
  const token = await request(
    meta.token_endpoint,
    policy,
    {
      method: 'POST',
      headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: callback.code,
        redirect_uri: callback.redirectUri,
        code_verifier: callback.codeVerifier,
      }),
    },
    'token endpoint',
  );
  if (token.status !== 200)
    throw new SsoFlowError('idp_error', `token endpoint answered ${token.status}${providerCode(token.body)}`);
  const tokens = token.body as { id_token?: unknown; access_token?: unknown } | null;
  if (typeof tokens?.id_token !== 'string')
    throw new SsoFlowError('invalid_response', 'token endpoint answered no ID token');
  const claims: Record<string, unknown> = {
    ...(await verifyIdToken(tokens.id_token, {
      issuer: meta.issuer,
      clientId: callback.clientId,
      jwksUri: meta.jwks_uri,
      nonce: callback.nonce,
      now: callback.now ?? new Date(),
      policy,
    })),
  };
  let source = claims;
  if (claims.email === undefined && meta.userinfo_endpoint && typeof tokens.access_token === 'string') {
    const info = await request(
      meta.userinfo_endpoint,
      policy,
      { headers: { authorization: `Bearer ${tokens.access_token}` } },
      'userinfo endpoint',
    );
    const body = info.body as Record<string, unknown> | null;
    if (info.status !== 200 || typeof body !== 'object' || body === null)
      throw new SsoFlowError('idp_error', `userinfo endpoint answered ${info.status}${providerCode(body)}`);
    // OpenID Connect Core section 5.3.4: a userinfo answer about someone else is not believed.
    if (body.sub !== claims.sub) throw new SsoFlowError('invalid_response', 'userinfo names another subject');
    source = body;
    for (const [name, value] of Object.entries(body)) if (!(name in claims)) claims[name] = value;
  }
  const email = typeof source.email === 'string' ? source.email.trim().toLowerCase() : '';
  if (!/^[^\s@]+@[^\s@]+$/.test(email)) throw new SsoFlowError('invalid_response', 'the provider gave no email');
  const verified = source.email_verified;
  return {
    subject: claims.sub as string,
    email,
    emailVerified:
      typeof verified === 'boolean' ? verified : verified === 'true' ? true : verified === 'false' ? false : undefined,
    ...(typeof claims.name === 'string' && claims.name ? { name: claims.name } : {}),
    claims,
  };
}
