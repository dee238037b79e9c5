import { ApiError } from './errors.js';

/**
 * docs/api.md "Permissions and roles" as data: the resources, their actions, the
 * 17 default permission strings and the four default roles. Everything else
 * (seeding, validation, the guard) reads this table.
 */
export const RESOURCE_ACTIONS = {
  users: ['read', 'write', 'delete'],
  organizations: ['read', 'write', 'delete'],
  members: ['read', 'write', 'delete'],
  invitations: ['read', 'write', 'delete'],
  roles: ['read', 'write', 'delete'],
  api_keys: ['read', 'write'],
} as const;

type ResourceActions = typeof RESOURCE_ACTIONS;
export type Resource = keyof ResourceActions;
export type Permission = { [R in Resource]: `${R}:${ResourceActions[R][number]}` }[Resource];

export const ALL_PERMISSIONS: readonly Permission[] = Object.entries(RESOURCE_ACTIONS).flatMap(([resource, actions]) =>
  actions.map((action) => `${resource}:${action}` as Permission),
);

/** How many permissions exist (docs/api.md "Permissions and roles"): the most a role or a key can list. */
export const PERMISSION_COUNT = ALL_PERMISSIONS.length;

const ACTIONS = [...new Set(Object.values(RESOURCE_ACTIONS).flat())];

/** `<resource>:<action>` with the allowed parts, from the table. */
export const PERMISSION_PATTERN = new RegExp(`^(${Object.keys(RESOURCE_ACTIONS).join('|')}):(${ACTIONS.join('|')})$`);

const READ_ONLY = ALL_PERMISSIONS.filter((permission) => permission.endsWith(':read'));

/** Platform roles stored in `users.role` (CHECK constraint in migrations/0001); declared only here. */
export const PLATFORM_ROLES = ['superadmin', 'admin', 'user'] as const;
export type PlatformRole = (typeof PLATFORM_ROLES)[number];

/** docs/api.md "Permissions and roles": default roles, seeded for every new organization. */
export const DEFAULT_ROLES = [
  { slug: 'owner', name: 'Owner', description: 'Full control of the organization', permissions: ALL_PERMISSIONS },
  {
    slug: 'admin',
    name: 'Admin',
    description: 'Manages the organization, except deleting it or its users',
    permissions: ALL_PERMISSIONS.filter((p) => p !== 'organizations:delete' && p !== 'users:delete'),
  },
  { slug: 'member', name: 'Member', description: 'Read-only access', permissions: READ_ONLY },
  { slug: 'viewer', name: 'Viewer', description: 'Read-only access', permissions: READ_ONLY },
] as const satisfies readonly { slug: string; name: string; description: string; permissions: readonly Permission[] }[];

export type DefaultRoleSlug = (typeof DEFAULT_ROLES)[number]['slug'];

export function isPermission(value: string): value is Permission {
  return (ALL_PERMISSIONS as readonly string[]).includes(value);
}

/** docs/api.md "Access": all listed permissions must be granted (AND). */
export function hasAll(granted: readonly string[], required: readonly string[]): boolean {
  return required.every((permission) => granted.includes(permission));
}

/** The required permissions that `granted` lacks, sorted (for INSUFFICIENT_PERMISSIONS details). */
export function missing(granted: readonly string[], required: readonly string[]): string[] {
  return required.filter((permission) => !granted.includes(permission)).sort();
}

/** Who asks, as far as the permission rules care: a session or an API key (`apiKey` set). */
export interface Caller {
  user: { role: string };
  apiKey?: unknown;
}

/**
 * The superadmin bypass: a superadmin holds every permission in every
 * organization, but only in a session of their own, never through an API key
 * (a key's caller is never a superadmin either: src/auth/api-key-auth.ts).
 */
export function bypassesPermissions(caller: Caller): boolean {
  return caller.user.role === 'superadmin' && !caller.apiKey;
}

/**
 * Nobody grants what they do not hold: the permissions of `wanted` (a role's,
 * an invitation's, a key's scopes) that the caller, holding `granted`, may
 * not hand out, sorted. None for a superadmin `caller`; without a caller no
 * bypass applies (what an API key carries, which never has the bypass).
 */
export function ungrantable({
  caller,
  granted,
  wanted,
}: {
  caller?: Caller;
  granted: readonly string[];
  wanted: readonly string[];
}): string[] {
  return caller && bypassesPermissions(caller) ? [] : missing(granted, [...new Set(wanted)]);
}

/**
 * 403 INSUFFICIENT_PERMISSIONS unless the caller may grant all of `wanted`
 * (`ungrantable`), naming each permission it lacks at `path`
 * (`caller lacks members:write`).
 */
export function assertGrantable({
  path,
  who = 'caller',
  ...grant
}: Parameters<typeof ungrantable>[0] & { path: string; who?: string }): void {
  const lacking = ungrantable(grant);
  if (lacking.length > 0) {
    throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions', {
      details: lacking.map((permission) => ({ path, message: `${who} lacks ${permission}` })),
    });
  }
}
