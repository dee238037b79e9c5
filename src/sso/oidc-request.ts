/**
 * The authorization request of an OpenID Connect sign-in (docs/sso.md
 * "Sign-in"): the authorization code flow with `state`, `nonce` and PKCE
 * (RFC 7636, S256 only). WebCrypto only: Node and Workers alike.
 */
import type { OidcMetadata } from '../db/sso-tables.js';

/** 32 random bytes, base64url: a `state`, a `nonce` or a PKCE verifier. */
export function randomToken(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** A PKCE pair (RFC 7636 section 4): the verifier stays in the flow state, the S256 challenge goes to the provider. */
export async function newPkce(): Promise<{ verifier: string; challenge: string }> {
  const verifier = randomToken();
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return { verifier, challenge: base64url(new Uint8Array(digest)) };
}

export interface AuthorizationRequest {
  clientId: string;
  redirectUri: string;
  /** Asked for besides `openid`, which is always asked for. */
  scopes: readonly string[];
  state: string;
  nonce: string;
  codeChallenge: string;
  /** The email the person typed, as a hint to the provider's login page. */
  loginHint?: string;
}

/** Where the browser goes: the authorization endpoint with a code request (query response mode, PKCE S256). */
export function authorizationUrl(
  meta: Pick<OidcMetadata, 'authorization_endpoint'>,
  request: AuthorizationRequest,
): string {
  const url = new URL(meta.authorization_endpoint);
  const params: Record<string, string> = {
    response_type: 'code',
    response_mode: 'query',
    client_id: request.clientId,
    redirect_uri: request.redirectUri,
    scope: [...new Set(['openid', ...request.scopes])].join(' '),
    state: request.state,
    nonce: request.nonce,
    code_challenge: request.codeChallenge,
    code_challenge_method: 'S256',
  };
  if (request.loginHint) params.login_hint = request.loginHint;
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  return url.href;
}
