// Members of the active organization (the service's `GET /api/members`), role
// changes (`PATCH /api/admin/members/{memberId}`), removal and invitations
// (better-auth's organization plugin, checked against the same permissions).
import { api, must } from '../clients.js';
import { activeOrganization, can, inOrganization, rerender, session } from '../session.js';
import { button, form, h, type Screen, section, select, table, when } from '../ui.js';

export const members: Screen = async (root) => {
  if (!inOrganization(root)) return;
  const [people, roles] = await Promise.all([must(api.GET('/api/members')), must(api.GET('/api/roles'))]);
  const roleOptions = roles.map((role) => ({ value: role.id, label: role.name }));
  const me = session()?.user.id;
  root.append(
    section(
      'Members',
      table(
        'members',
        ['Name', 'Email', 'Role', ''],
        people.map((member) => {
          const choice = select('roleId', roleOptions, member.roleId ?? '');
          return [
            member.name,
            member.email,
            can('members:write') && member.userId !== me
              ? h(
                  'span',
                  { dataset: { email: member.email } },
                  choice,
                  button(
                    'change role',
                    async () => {
                      const roleId = (choice as HTMLSelectElement).value;
                      await must(
                        api.PATCH('/api/admin/members/{memberId}', {
                          params: { path: { memberId: member.id } },
                          body: { roleId },
                        }),
                      );
                      await rerender();
                    },
                    { textContent: 'Change' },
                  ),
                )
              : (member.roleSlug ?? '—'),
            can('members:delete') && member.userId !== me
              ? button(
                  'remove member',
                  async () => {
                    await must(
                      api.POST('/api/auth/organization/remove-member', { body: { memberIdOrEmail: member.id } }),
                    );
                    await rerender();
                  },
                  { textContent: 'Remove', dataset: { email: member.email } },
                )
              : '',
          ];
        }),
      ),
    ),
  );
  if (can('invitations:read')) root.append(await invitations(roles.map((role) => role.slug)));
};

async function invitations(roleSlugs: string[]): Promise<HTMLElement> {
  const organizationId = activeOrganization()?.id;
  const all =
    (await must(api.GET('/api/auth/organization/list-invitations', { params: { query: { organizationId } } }))) ?? [];
  const pending = all.filter((invitation) => invitation.status === 'pending');
  return section(
    'Invitations',
    table(
      'invitations',
      ['Email', 'Role', 'Expires', ''],
      pending.map((invitation) => [
        invitation.email,
        invitation.role,
        when(new Date(invitation.expiresAt).toISOString()),
        can('invitations:delete')
          ? button(
              'cancel invitation',
              async () => {
                await must(
                  api.POST('/api/auth/organization/cancel-invitation', { body: { invitationId: invitation.id } }),
                );
                await rerender();
              },
              { textContent: 'Cancel', dataset: { email: invitation.email } },
            )
          : '',
      ]),
    ),
    can('invitations:write') &&
      form(
        'invite-form',
        'invite member',
        [{ name: 'email', label: 'Email', type: 'email' }],
        async (values) => {
          // The invitation mail links to APP_URL; the invitee accepts on the Organizations screen.
          // Any role slug of the organization.
          await must(
            api.POST('/api/auth/organization/invite-member', {
              body: { email: values.email, role: values.all('role')[0] },
            }),
          );
          await rerender();
        },
        [
          select(
            'role',
            roleSlugs.filter((slug) => slug !== 'owner').map((slug) => ({ value: slug, label: slug })),
            'member',
          ),
        ],
      ),
  );
}
