// The user's organizations (better-auth's organization plugin, called through
// the typed client): create one, switch the active one (tenant routes act in
// it), and answer invitations.
import { api, must } from '../clients.js';
import { activeOrganization, myOrganizations, refresh, signedIn } from '../session.js';
import { button, form, h, type Screen, section, table } from '../ui.js';

const use = async (organizationId: string) => {
  await must(api.POST('/api/auth/organization/set-active', { body: { organizationId } }));
  await refresh();
};

export const organizations: Screen = async (root) => {
  if (!signedIn(root)) return;
  const active = activeOrganization();
  const invitations = await must(api.GET('/api/auth/organization/list-user-invitations'));
  const pending = (invitations ?? []).filter((invitation) => invitation.status === 'pending');
  root.append(
    section(
      'Your organizations',
      table(
        'organizations',
        ['Name', 'Slug', ''],
        myOrganizations().map((organization) => [
          organization.name,
          organization.slug,
          organization.id === active?.id
            ? h('strong', {}, 'active')
            : button(`switch organization`, () => use(organization.id), {
                textContent: 'Use',
                dataset: { slug: organization.slug },
              }),
        ]),
      ),
    ),
    section(
      'New organization',
      form(
        'org-form',
        'create organization',
        [
          { name: 'name', label: 'Name' },
          { name: 'slug', label: 'Slug', placeholder: 'acme' },
        ],
        async ({ name, slug }) => {
          const created = await must(api.POST('/api/auth/organization/create', { body: { name, slug } }));
          if (!created) throw new Error('no organization in the answer');
          await use(created.id);
        },
      ),
    ),
    section(
      'Invitations to you',
      pending.length === 0
        ? h('p', { id: 'no-invitations' }, 'No pending invitations.')
        : table(
            'my-invitations',
            ['Organization', 'Role', 'Expires', ''],
            pending.map((invitation) => [
              invitation.organizationName ?? invitation.organizationId,
              invitation.role,
              new Date(invitation.expiresAt).toLocaleDateString(),
              h(
                'span',
                {},
                button(
                  'accept invitation',
                  async () => {
                    await must(
                      api.POST('/api/auth/organization/accept-invitation', { body: { invitationId: invitation.id } }),
                    );
                    await use(invitation.organizationId);
                  },
                  { textContent: 'Accept' },
                ),
                button(
                  'reject invitation',
                  async () => {
                    await must(
                      api.POST('/api/auth/organization/reject-invitation', { body: { invitationId: invitation.id } }),
                    );
                    await refresh();
                  },
                  { textContent: 'Reject' },
                ),
              ),
            ]),
          ),
    ),
  );
};
