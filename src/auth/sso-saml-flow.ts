import type { SsoConnection, SsoFlow } from '../db/queries/sso-flows.js';
import { SsoFlowError } from '../sso/errors.js';
import { authnRequestUrl, validateSamlResponse } from '../sso/saml.js';
import type { SsoContext } from './sso-context.js';
import type { SsoIdentity } from './sso-provision.js';

/** A SAML 2.0 connection's half of single sign-on (src/auth/sso-plugin.ts; the protocol: src/sso/saml.ts). */

const CLOCK_SKEW_SECONDS = 60;
/**
 * A transient NameID changes at every sign-in (SAML 2.0 Core 8.3.8): it names
 * no one twice, so the link's subject is then the address (at the
 * organization's verified domain, which is the proof either way).
 */
const TRANSIENT = 'urn:oasis:names:tc:SAML:2.0:nameid-format:transient';
/** Attributes IdPs commonly send the person's name in (Entra ID, Okta, Google Workspace). */
const NAME_ATTRIBUTES = [
  'displayName',
  'name',
  'http://schemas.microsoft.com/identity/claims/displayname',
  'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name',
];

function configured(connection: SsoConnection) {
  const { saml_idp_entity_id: entityId, saml_entry_point: entryPoint, saml_certificates: certificates } = connection;
  if (connection.type !== 'saml' || !entityId || !entryPoint || !certificates?.length)
    throw new SsoFlowError('invalid_request', 'The connection is not a SAML connection');
  return { entityId, entryPoint, certificates };
}

/** The IdP's sign-in URL with an AuthnRequest (RelayState = the flow's state), and the request's ID. */
export async function startSaml(
  sso: SsoContext,
  connection: SsoConnection,
  { state }: { state: string },
): Promise<{ url: string; flow: Pick<SsoFlow, 'requestId'> }> {
  const { url, requestId } = await authnRequestUrl({
    sp: sso.samlSp(connection.id),
    idp: configured(connection),
    relayState: state,
  });
  return { url, flow: { requestId } };
}

/**
 * The posted response verified: InResponseTo the flow's request, or, with
 * no flow (IdP-initiated: no RelayState), only when the connection allows it.
 */
export async function completeSaml(
  sso: SsoContext,
  connection: SsoConnection,
  flow: SsoFlow | null,
  samlResponse: string | undefined,
): Promise<SsoIdentity> {
  if (!samlResponse) throw new SsoFlowError('invalid_request', 'The form carries no SAMLResponse');
  const { entityId, certificates } = configured(connection);
  if (!flow && !connection.allow_idp_initiated)
    throw new SsoFlowError('idp_initiated_refused', 'The connection does not accept IdP-initiated sign-ins');
  if (flow && !flow.requestId) throw new SsoFlowError('invalid_state', 'The state is not a SAML sign-in');
  const result = await validateSamlResponse({
    samlResponse,
    sp: sso.samlSp(connection.id),
    idp: { entityId, certificates },
    expectedRequestId: flow?.requestId ?? null,
    now: sso.clock(),
    clockSkewSeconds: CLOCK_SKEW_SECONDS,
  });
  const name = NAME_ATTRIBUTES.map((attribute) => result.attributes[attribute]?.[0]).find(Boolean);
  return {
    subject: result.nameIdFormat === TRANSIENT ? result.email : result.nameId,
    email: result.email,
    name,
    claims: result.attributes,
    assertion: { id: result.assertionId, notOnOrAfter: result.notOnOrAfter },
  };
}
