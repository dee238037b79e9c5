// The active organization's roles: the four defaults and custom ones, each a
// set of permission strings. The Owner role holds every permission there is,
// so its list is the catalog the checkboxes offer.
import type { components } from 'gatehouse/client';
import { api, must, type Permission } from '../clients.js';
import { can, inOrganization, rerender } from '../session.js';
import { button, checkboxes, form, h, type Screen, section, table } from '../ui.js';

type Role = components['schemas']['Role'];

/** The custom role whose permissions are being edited, if any. */
let editing: string | null = null;
let created = '';

export const roles: Screen = async (root) => {
  if (!inOrganization(root)) return;
  const all = await must(api.GET('/api/roles'));
  const catalog = all.find((role) => role.slug === 'owner')?.permissions ?? [];
  const notice = h('p', { id: 'role-created' }, created);
  created = '';
  root.append(
    section(
      'Roles',
      table(
        'roles',
        ['Name', 'Slug', 'Permissions', ''],
        all.map((role) => [role.name, role.slug, role.permissions.join(', '), actions(role)]),
      ),
      notice,
    ),
  );
  const edited = all.find((role) => role.id === editing);
  if (edited && can('roles:write')) root.append(editForm(edited, catalog));
  if (can('roles:write')) {
    root.append(
      section(
        'New role',
        form(
          'role-form',
          'create role',
          [
            { name: 'name', label: 'Name' },
            { name: 'description', label: 'Description', required: false },
          ],
          async (values) => {
            const role = await must(
              api.POST('/api/roles', {
                body: {
                  name: values.name,
                  description: values.description,
                  permissions: values.all('permissions') as Permission[],
                },
              }),
            );
            created = `Created role ${role.name} (${role.slug}) with ${role.permissions.join(', ') || 'no permissions'}`;
            await rerender();
          },
          [checkboxes('permissions', catalog)],
        ),
      ),
    );
  }
};

function actions(role: Role): HTMLElement {
  if (role.isDefault) return h('span', { className: 'hint' }, 'default');
  return h(
    'span',
    {},
    can('roles:write') &&
      button(
        'edit role',
        async () => {
          editing = role.id;
          await rerender();
        },
        { textContent: 'Edit', dataset: { slug: role.slug } },
      ),
    can('roles:delete') &&
      button(
        'delete role',
        async () => {
          // Its members move to the Viewer role (the answer counts them).
          await must(api.DELETE('/api/roles/{id}', { params: { path: { id: role.id } } }));
          await rerender();
        },
        { textContent: 'Delete', dataset: { slug: role.slug } },
      ),
  );
}

function editForm(role: Role, catalog: string[]): HTMLElement {
  return section(
    `Edit ${role.name}`,
    form(
      'role-edit-form',
      'save role',
      [
        { name: 'name', label: 'Name', value: role.name },
        { name: 'description', label: 'Description', value: role.description, required: false },
      ],
      async (values) => {
        await must(
          api.PATCH('/api/roles/{id}', {
            params: { path: { id: role.id } },
            body: {
              name: values.name,
              description: values.description,
              permissions: values.all('permissions') as Permission[],
            },
          }),
        );
        editing = null;
        await rerender();
      },
      [checkboxes('permissions', catalog, role.permissions)],
    ),
  );
}
