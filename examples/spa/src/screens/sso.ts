// The active organization's single sign-on: its email domains (the TXT
// record to publish, then the check), and its identity-provider connections
// (OIDC or SAML) with what to enter in the IdP. Changes need a fresh session:
// the step-up prompt asks for the password first when it is stale.
import type { components } from 'gatehouse/client';
import { api, must } from '../clients.js';
import { can, inOrganization, rerender } from '../session.js';
import { button, form, h, type Screen, section, table, when } from '../ui.js';

type Domain = components['schemas']['SsoDomain'];
type Connection = components['schemas']['SsoConnection'];

export const sso: Screen = async (root) => {
  if (!inOrganization(root)) return;
  if (!can('organizations:read')) {
    root.append(h('p', { className: 'hint' }, 'You need organizations:read to see single sign-on.'));
    return;
  }
  const [domains, connections] = await Promise.all([
    must(api.GET('/api/sso/domains')),
    must(api.GET('/api/sso/connections')),
  ]);
  const writable = can('organizations:write');
  root.append(domainsSection(domains, writable), connectionsSection(connections, writable));
  if (writable) root.append(oidcForm(), samlForm());
};

function domainsSection(domains: Domain[], writable: boolean): HTMLElement {
  return section(
    'Domains',
    h(
      'p',
      {},
      "People sign in with single sign-on at the verified domains. Publish a pending domain's TXT record at your DNS provider, then verify it.",
    ),
    table(
      'sso-domains',
      ['Domain', 'Status', 'TXT record (name, value)', ''],
      domains.map((domain) => [
        domain.domain,
        domain.status === 'verified' ? `verified ${when(domain.verifiedAt)}` : 'pending',
        h(
          'span',
          {},
          h('code', { className: 'txt-name' }, domain.txtName),
          h('br', {}),
          h('code', { className: 'txt-value' }, domain.txtValue),
        ),
        h(
          'span',
          { dataset: { domain: domain.domain } },
          writable &&
            domain.status === 'pending' &&
            button(
              'verify domain',
              async () => {
                // 409 DOMAIN_NOT_VERIFIED until DNS answers the record; DOMAIN_TAKEN: another organization has it.
                await must(api.POST('/api/sso/domains/{id}/verify', { params: { path: { id: domain.id } } }));
                await rerender();
              },
              { textContent: 'Verify', className: 'verify' },
            ),
          writable &&
            button(
              'delete domain',
              async () => {
                await must(api.DELETE('/api/sso/domains/{id}', { params: { path: { id: domain.id } } }));
                await rerender();
              },
              { textContent: 'Delete', className: 'delete' },
            ),
        ),
      ]),
    ),
    writable &&
      form(
        'sso-domain-form',
        'add domain',
        [{ name: 'domain', label: 'Domain', placeholder: 'example.com' }],
        ({ domain }) => must(api.POST('/api/sso/domains', { body: { domain } })).then(rerender),
      ),
  );
}

/** What the IdP's app asks for: the connection's `sp` (they depend only on AUTH_URL and the connection's id). */
function forTheIdp(connection: Connection): HTMLElement {
  if (connection.type === 'oidc')
    return h('span', {}, 'Redirect URI: ', h('code', { className: 'redirect-uri' }, connection.sp.redirectUri));
  return h(
    'span',
    {},
    'Entity ID: ',
    h('code', { className: 'entity-id' }, connection.sp.entityId),
    h('br', {}),
    'ACS URL: ',
    h('code', { className: 'acs-url' }, connection.sp.acsUrl),
    h('br', {}),
    h('a', { href: connection.sp.metadataUrl, target: '_blank', rel: 'noopener' }, 'Service provider metadata (XML)'),
  );
}

function connectionsSection(connections: Connection[], writable: boolean): HTMLElement {
  return section(
    'Identity providers',
    h(
      'p',
      {},
      'Sign-in goes through the oldest enabled connection. Disabling or deleting one ends the sessions it created.',
    ),
    table(
      'sso-connections',
      ['Name', 'Type', 'State', 'Enter in your IdP', ''],
      connections.map((connection) => [
        connection.name,
        connection.type === 'oidc' ? `OIDC (${connection.issuer})` : `SAML (${connection.idpEntityId})`,
        `${connection.enabled ? 'enabled' : 'disabled'}${connection.mfaAtIdp ? ', MFA at the IdP' : ''}`,
        forTheIdp(connection),
        h(
          'span',
          { dataset: { name: connection.name } },
          writable &&
            button(
              connection.enabled ? 'disable connection' : 'enable connection',
              async () => {
                const body = { enabled: !connection.enabled };
                await must(api.PATCH('/api/sso/connections/{id}', { params: { path: { id: connection.id } }, body }));
                await rerender();
              },
              { textContent: connection.enabled ? 'Disable' : 'Enable', className: 'toggle' },
            ),
          writable &&
            button(
              'delete connection',
              async () => {
                await must(api.DELETE('/api/sso/connections/{id}', { params: { path: { id: connection.id } } }));
                await rerender();
              },
              { textContent: 'Delete', className: 'delete' },
            ),
        ),
      ]),
    ),
  );
}

/** `mfaAtIdp`: the IdP asks for a second factor, so the connection's sessions are multi-factor. */
const mfaAtIdp = () =>
  h(
    'label',
    { className: 'check' },
    h('input', { type: 'checkbox', name: 'mfaAtIdp', value: 'true' }),
    'The identity provider asks for a second factor',
  );

function oidcForm(): HTMLElement {
  return section(
    'Connect an OpenID Connect provider',
    h(
      'p',
      { className: 'hint' },
      "Create a web app at the IdP first (its client ID and secret), then enter this connection's Redirect URI there.",
    ),
    form(
      'sso-oidc-form',
      'create OIDC connection',
      [
        { name: 'name', label: 'Name', placeholder: 'Okta' },
        { name: 'issuer', label: 'Issuer', type: 'url', placeholder: 'https://example.okta.com' },
        { name: 'clientId', label: 'Client ID' },
        { name: 'clientSecret', label: 'Client secret', type: 'password' },
      ],
      async ({ name, issuer, clientId, clientSecret, all }) => {
        const body = {
          type: 'oidc' as const,
          name,
          issuer,
          clientId,
          clientSecret,
          mfaAtIdp: all('mfaAtIdp').length > 0,
        };
        await must(api.POST('/api/sso/connections', { body }));
        await rerender();
      },
      [mfaAtIdp()],
    ),
  );
}

function samlForm(): HTMLElement {
  return section(
    'Connect a SAML provider',
    h(
      'p',
      { className: 'hint' },
      "Paste the IdP's metadata (Entra ID: Federation Metadata XML), then enter this connection's Entity ID and ACS URL in the IdP.",
    ),
    form(
      'sso-saml-form',
      'create SAML connection',
      [{ name: 'name', label: 'Name', placeholder: 'Entra ID' }],
      async ({ name, all }) => {
        const body = {
          type: 'saml' as const,
          name,
          metadataXml: all('metadataXml')[0] ?? '',
          mfaAtIdp: all('mfaAtIdp').length > 0,
        };
        await must(api.POST('/api/sso/connections', { body }));
        await rerender();
      },
      [
        // A textarea: metadata spans lines, which a text input would drop.
        h(
          'label',
          {},
          h('span', {}, 'IdP metadata XML'),
          h('textarea', { name: 'metadataXml', required: true, rows: 6, placeholder: '<EntityDescriptor …>' }),
        ),
        mfaAtIdp(),
      ],
    ),
  );
}
