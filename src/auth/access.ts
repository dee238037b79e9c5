import type { Permission, PlatformRole } from '../shared/permissions.js';

/**
 * The permission rules every door applies: the superadmin bypass and "nobody
 * grants what they do not hold". Their home is the permission table's module
 * (src/shared/permissions.ts), so the queries under db/ apply the same ones.
 */
export { assertGrantable, bypassesPermissions, type Caller, ungrantable } from '../shared/permissions.js';

/**
 * How a route is reached (docs/api.md "Access"): public, optional-auth,
 * or a session with optional platform roles, an active organization and a
 * permission list. Declared once per route, in its definition.
 */
export type Access =
  | { kind: 'public' }
  | { kind: 'optional' }
  | {
      kind: 'session';
      platformRoles?: readonly PlatformRole[];
      organization?: boolean;
      permissions?: readonly Permission[];
      /** docs/api.md "Accounts scheduled for deletion": the few routes an account scheduled for deletion may still use. */
      allowScheduledForDeletion?: boolean;
      /**
       * API_KEY_AUTH: keys reach permission-guarded tenant routes only, and
       * not the ones that set this false (no key mints keys).
       */
      apiKeys?: boolean;
      /**
       * A sensitive action (docs/security.md "Sensitive actions and step-up"): it needs a session
       * that proved every factor within STEP_UP_MAX_AGE, and no API key ever
       * performs it.
       */
      sensitive?: boolean;
    };

/**
 * SCIM's door (docs/scim.md): a SCIM token in force, under /api/scim/v2 and
 * nowhere else; no session or API key passes it. Kept out of `Access`: no
 * service route (nor the OpenAPI document) declares it.
 */
export type ScimAccess = { kind: 'scim' };

type SessionAccess = Extract<Access, { kind: 'session' }>;
type SessionOptions = Omit<SessionAccess, 'kind'>;

/**
 * What a service route declares (router.ts `defineRoute`). A route that acts
 * in an organization (it needs one, or permissions there) states whether API
 * keys may call it: `apiKeys` is required, and leaving it out is a type error.
 * Keys still reach only routes with permissions and no platform role.
 */
export type RouteAccess =
  | Extract<Access, { kind: 'public' | 'optional' }>
  | (SessionAccess & { organization?: false; permissions?: undefined; apiKeys?: undefined })
  | (SessionAccess & { apiKeys: boolean });

/** A session route, typed as declared (so `defineRoute` sees whether it acts in an organization). */
function session(): { kind: 'session' };
function session<const O extends SessionOptions>(options: O): { kind: 'session' } & O;
function session(options: SessionOptions = {}) {
  return { kind: 'session' as const, ...options };
}

export const access = {
  public: () => ({ kind: 'public' }) as const,
  optional: () => ({ kind: 'optional' }) as const,
  session,
  /**
   * A tenant route: the permissions it needs in the active organization (or
   * an API key's), and whether API keys may call it.
   */
  tenant: <const O extends Omit<SessionOptions, 'organization' | 'permissions' | 'apiKeys'>>(
    permissions: readonly Permission[],
    { apiKeys, ...options }: O & { apiKeys: boolean },
  ) => ({ kind: 'session' as const, organization: true as const, permissions, apiKeys, ...options }),
  /**
   * Permissions in the active organization without a decision on API keys:
   * for the auth library's rows and guard() (defineRoute requires `tenant`).
   */
  permissions: (...permissions: Permission[]): Access => ({ kind: 'session', organization: true, permissions }),
  platform: (...platformRoles: PlatformRole[]) => ({ kind: 'session' as const, platformRoles }),
  scim: (): ScimAccess => ({ kind: 'scim' }),
};

/**
 * The organization a call acts on and the caller's permissions there, when
 * that is not simply the session's active organization (the auth library's
 * organization routes name theirs in the request; src/library/organization-gate.ts).
 */
export interface OrganizationTarget {
  id: string | null;
  permissions: readonly string[];
  /** The organization requires multi-factor sessions (README "Multi-factor authentication"). */
  requireMfa: boolean;
  /** Its single sign-on policy binds this session (docs/sso.md "Policy"); false for non-members. */
  ssoRequired: boolean;
  /** The caller is an Owner there: the policy lets them in (break-glass, audited). */
  isOwner: boolean;
}
