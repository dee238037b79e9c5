// API keys of the active organization: the key itself is shown once, in the
// answer to its creation; the list has its prefix and last four characters.
import { api, must, type Permission } from '../clients.js';
import { can, inOrganization, rerender, session } from '../session.js';
import { button, checkboxes, form, h, type Screen, section, table, when } from '../ui.js';

/** The key just created: shown on this render only. */
let revealed = '';

export const apiKeys: Screen = async (root) => {
  if (!inOrganization(root)) return;
  const keys = can('api_keys:read') ? await must(api.GET('/api/api-keys')) : [];
  const shown = h(
    'p',
    { id: 'api-key-once', hidden: !revealed },
    'Copy it now, it is shown only once: ',
    h('code', { id: 'api-key' }, revealed),
  );
  revealed = '';
  root.append(
    section(
      'API keys',
      shown,
      table(
        'api-keys',
        ['Name', 'Key', 'Scopes', 'Created', 'Last used', ''],
        keys.map((key) => [
          key.name,
          `${key.keyPrefix}…${key.lastFour}`,
          key.scopes.join(', '),
          when(key.createdAt),
          when(key.lastUsedAt),
          key.revokedAt
            ? `revoked ${when(key.revokedAt)}`
            : can('api_keys:write')
              ? button(
                  'revoke API key',
                  async () => {
                    await must(api.DELETE('/api/api-keys/{id}', { params: { path: { id: key.id } } }));
                    await rerender();
                  },
                  { textContent: 'Revoke', dataset: { name: key.name } },
                )
              : '',
        ]),
      ),
    ),
  );
  if (!can('api_keys:write')) return;
  root.append(
    section(
      'New API key',
      // A key's scopes are a subset of its creator's permissions.
      form(
        'key-form',
        'create API key',
        [{ name: 'name', label: 'Name' }],
        async (values) => {
          const created = await must(
            api.POST('/api/api-keys', { body: { name: values.name, scopes: values.all('scopes') as Permission[] } }),
          );
          revealed = created.key;
          await rerender();
        },
        [checkboxes('scopes', session()?.permissions ?? [])],
      ),
    ),
  );
};
