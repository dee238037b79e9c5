/**
 * What single sign-on refuses, and how (docs/sso.md). A connection's
 * configuration that does not hold answers 400 VALIDATION_ERROR naming the
 * field; a sign-in that fails redirects to the error callback with
 * `?error=<code>` and creates no session. Messages never hold a secret, a
 * token or an assertion.
 */

/** A connection's configuration the service cannot use (a bad issuer, metadata or certificate). */
export class SsoConfigError extends Error {
  constructor(
    /** The request field at fault: `issuer`, `metadataXml`, `idpCertificate`... */
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'SsoConfigError';
  }
}

/** The `error` a failed sign-in redirects with (docs/sso.md "Sign-in"). */
export const SSO_ERROR_CODES = [
  'invalid_request',
  'invalid_state',
  'idp_error',
  'invalid_response',
  'replayed',
  'domain_not_allowed',
  'idp_initiated_refused',
  'connection_disabled',
  'account_unavailable',
] as const;

export type SsoErrorCode = (typeof SSO_ERROR_CODES)[number];

/** A sign-in through an identity provider that must not create a session. */
export class SsoFlowError extends Error {
  constructor(
    readonly code: SsoErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'SsoFlowError';
  }
}
