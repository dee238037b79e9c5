/**
 * The AuthnRequest that starts an SP-initiated sign-in: samlify's, sent with
 * the HTTP-Redirect binding, unsigned (our metadata says
 * AuthnRequestsSigned="false": the request carries nothing the IdP must
 * trust, and the response is bound to it by InResponseTo), the flow's state
 * as RelayState.
 */
import { SsoFlowError } from './errors.js';
import { idpEntity, type SamlIdp, type SamlSp, spEntity } from './saml-entities.js';

export function authnRequestUrl({ sp, idp, relayState }: { sp: SamlSp; idp: SamlIdp; relayState: string }): {
  url: string;
  requestId: string;
} {
  if (!idp.entryPoint) throw new SsoFlowError('invalid_request', 'The SAML connection has no sign-in URL');
  const { id, context } = spEntity(sp).createLoginRequest(idpEntity(idp), 'redirect', { relayState });
  return { url: context, requestId: id };
}
