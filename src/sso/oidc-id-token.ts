/**
 * The checks an ID token passes before its claims are believed (OpenID
 * Connect Core 1.0 section 3.1.3.7; docs/sso.md "Sign-in"): a signature by a
 * key of the provider's JWKS with an asymmetric algorithm (never `none`, never
 * an HMAC keyed with the client secret, which the client shares), the
 * issuer, the audience (and `azp` when there are several), `exp`, `nbf` and
 * `iat` within 60 seconds of now, and the flow's nonce.
 */
import { createRemoteJWKSet, customFetch, errors, type JWTPayload, jwtVerify, type RemoteJWKSet } from 'jose';
import { SsoFlowError } from './errors.js';
import { checkedFetch, SSO_FETCH_TIMEOUT_MS, SsoFetchError, type SsoFetchPolicy } from './fetch.js';

export const ID_TOKEN_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'ES256', 'ES384', 'EdDSA'];
export const CLOCK_TOLERANCE_SECONDS = 60;
/** An ID token is issued at the code exchange: one older than this is not this flow's. */
const MAX_TOKEN_AGE_SECONDS = 10 * 60;

/**
 * jose's key-set getters, one per JWKS URL and address rules: they hold the
 * provider's public keys (and when they were fetched), nothing of a person.
 * Bounded: the oldest goes first.
 */
const jwksGetters = new Map<string, { getter: RemoteJWKSet; policy: SsoFetchPolicy }>();
const MAX_GETTERS = 500;

function jwksFor(uri: string, policy: SsoFetchPolicy): RemoteJWKSet {
  const key = `${policy.allowPrivateUrls}:${policy.httpsOnly}:${uri}`;
  let entry = jwksGetters.get(key);
  if (!entry) {
    const created: { getter?: RemoteJWKSet; policy: SsoFetchPolicy } = { policy };
    created.getter = createRemoteJWKSet(new URL(uri), {
      timeoutDuration: SSO_FETCH_TIMEOUT_MS,
      // The key set is fetched like every other request to the provider (the policy's fetch of the latest caller).
      [customFetch]: (url, { headers }) =>
        checkedFetch(url, created.policy, { headers: Object.fromEntries(headers.entries()) }),
    });
    if (jwksGetters.size >= MAX_GETTERS) jwksGetters.delete(jwksGetters.keys().next().value!);
    entry = created as { getter: RemoteJWKSet; policy: SsoFetchPolicy };
    jwksGetters.set(key, entry);
  }
  entry.policy = policy;
  return entry.getter;
}

export interface IdTokenExpectations {
  issuer: string;
  clientId: string;
  jwksUri: string;
  nonce: string;
  now: Date;
  policy: SsoFetchPolicy;
}

/** The verified claims; throws SsoFlowError ('idp_error' when the key set cannot be fetched, else 'invalid_response'). */
export async function verifyIdToken(idToken: string, expected: IdTokenExpectations): Promise<JWTPayload> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(idToken, jwksFor(expected.jwksUri, expected.policy), {
      issuer: expected.issuer,
      audience: expected.clientId,
      algorithms: ID_TOKEN_ALGORITHMS,
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      currentDate: expected.now,
      maxTokenAge: MAX_TOKEN_AGE_SECONDS,
      requiredClaims: ['sub', 'exp', 'iat'],
    }));
  } catch (error) {
    if (error instanceof SsoFetchError) throw new SsoFlowError('idp_error', `JWKS: ${error.message}`);
    if (error instanceof errors.JWKSTimeout) throw new SsoFlowError('idp_error', 'JWKS: did not answer in time');
    // jose's codes and claim names say what failed without quoting the token.
    const what =
      error instanceof errors.JWTClaimValidationFailed || error instanceof errors.JWTExpired
        ? `${error.code} (${error.claim})`
        : error instanceof errors.JOSEError
          ? error.code
          : 'malformed';
    throw new SsoFlowError('invalid_response', `ID token refused: ${what}`);
  }
  // Several audiences: the token must be issued to us (azp); an azp that is present must be us.
  const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
  if ((audiences.length > 1 || payload.azp !== undefined) && payload.azp !== expected.clientId)
    throw new SsoFlowError('invalid_response', 'ID token refused: azp is not this client');
  if (typeof payload.nonce !== 'string' || payload.nonce !== expected.nonce)
    throw new SsoFlowError('invalid_response', 'ID token refused: nonce does not match');
  if (typeof payload.sub !== 'string' || payload.sub === '')
    throw new SsoFlowError('invalid_response', 'ID token refused: no subject');
  return payload;
}
