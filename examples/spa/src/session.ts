// The signed-in state the header shows and the screens read: the enriched
// session (`GET /api/session`: user, session, the active organization's
// permissions) and the user's organizations. Screens call `refresh()` after
// anything that changes them, or `rerender()` after a change of their own
// data: both resolve once the screen shows the new state. `reload()` updates
// the header only (the step-up prompt's, before it retries an action).
import type { components } from 'gatehouse/client';
import { ApiFailure, api, must } from './clients.js';
import { $, h } from './ui.js';

export type Session = NonNullable<components['schemas']['EnrichedSession']>;
export interface Organization {
  id: string;
  name: string;
  slug: string;
}

let current: Session | null = null;
let organizations: Organization[] = [];
let render: () => Promise<void> = async () => {};

/** The router's: draws the current screen again. */
export const setRenderer = (renderer: () => Promise<void>): void => {
  render = renderer;
};
export const rerender = (): Promise<void> => render();

export const session = (): Session | null => current;
export const myOrganizations = (): Organization[] => organizations;
export const activeOrganization = (): Organization | undefined =>
  organizations.find((organization) => organization.id === current?.session.activeOrganizationId);
export const can = (permission: string): boolean => current?.permissions.includes(permission) ?? false;

/** An account scheduled for deletion is refused them until it cancels (its Account screen still works). */
async function listOrganizations(): Promise<Organization[]> {
  try {
    return (await must(api.GET('/api/auth/organization/list'))) ?? [];
  } catch (error) {
    if (error instanceof ApiFailure && error.code === 'ACCOUNT_SCHEDULED_FOR_DELETION') return [];
    throw error;
  }
}

/** Reads the session and the organizations again and updates the header, leaving the screen as it is. */
export async function reload(): Promise<void> {
  current = await must(api.GET('/api/session'));
  organizations = current ? await listOrganizations() : [];
  const active = activeOrganization();
  $('who').textContent = current ? `Signed in as ${current.user.email}` : 'Signed out';
  $('mfa').textContent = current ? (current.session.mfa ? 'multi-factor' : 'single-factor') : '';
  $('org').textContent = active ? `Organization: ${active.name} (${active.slug})` : current ? 'No organization' : '';
  $('permissions').textContent = active ? `(${current?.permissions.length ?? 0} permissions)` : '';
  $('sign-out').hidden = !current;
}

export async function refresh(): Promise<void> {
  await reload();
  await render();
}

/** False (with a note in `root`) when nobody is signed in. */
export function signedIn(root: HTMLElement): boolean {
  if (current) return true;
  root.append(h('p', { className: 'hint' }, 'Sign in first (', h('a', { href: '#/account' }, 'Account'), ').'));
  return false;
}

/** False (with a note in `root`) without an active organization: tenant routes act in it. */
export function inOrganization(root: HTMLElement): boolean {
  if (!signedIn(root)) return false;
  // The session names it; the list (for its name) can be refused, e.g. to an account scheduled for deletion.
  if (current?.session.activeOrganizationId) return true;
  root.append(
    h(
      'p',
      { className: 'hint' },
      'Create or choose an organization first (',
      h('a', { href: '#/organizations' }, 'Organizations'),
      ').',
    ),
  );
  return false;
}
