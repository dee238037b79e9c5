import { type Kysely, sql } from 'kysely';
import type { TestApp } from './app.js';
import { call, expectStatus, linkIn, mailsTo } from './http.js';
import { type SignedInUser, signedInUser } from './users.js';

/**
 * Organizations, invitations and membership through the real plugin routes
 * (docs/api.md "Organizations"): create, invite-member -> mail -> accept-invitation,
 * set-active. No shortcut writes to the database here; the users themselves
 * are seeded verified accounts that sign in for real (tests/support/users.ts).
 */

export type Actor = Pick<SignedInUser, 'jar' | 'id' | 'email'>;

export interface TestOrganization {
  id: string;
  name: string;
  slug: string;
  owner: SignedInUser;
  ownerMemberId: string;
}

export interface MemberRecord {
  id: string;
  userId: string;
  email: string;
  name: string;
  roleId: string | null;
  roleSlug: string | null;
  createdAt: string;
}

export interface RoleRecord {
  id: string;
  name: string;
  slug: string;
  description: string;
  permissions: string[];
  isDefault: boolean;
  createdAt: string;
  updatedAt: string;
}

export function uniqueSlug(label = 'org'): string {
  return `${label}-${crypto.randomUUID().slice(0, 8)}`;
}

/** Creates an organization as `owner` (who becomes its Owner) and makes it `owner`'s active one. */
export async function createOrganization(
  t: TestApp,
  owner: SignedInUser,
  options: { name?: string; slug?: string } = {},
): Promise<TestOrganization> {
  const slug = options.slug ?? uniqueSlug();
  const name = options.name ?? `Org ${slug}`;
  const created = await expectStatus<{ id: string }>(
    await call(t, '/api/auth/organization/create', { body: { name, slug }, jar: owner.jar }),
    200,
  );
  await setActive(t, owner, created.id);
  const mine = (await listMembers(t, owner)).find((m) => m.userId === owner.id);
  if (!mine) throw new Error('the creator is not a member of the new organization');
  return { id: created.id, name, slug, owner, ownerMemberId: mine.id };
}

export async function setActive(t: TestApp, user: Actor, organizationId: string): Promise<void> {
  await expectStatus(
    await call(t, '/api/auth/organization/set-active', { body: { organizationId }, jar: user.jar }),
    200,
  );
}

/** POST invite-member as `inviter` (the raw response: tests of refusals read it). */
export function invite(
  t: TestApp,
  inviter: Actor,
  body: { email: string; role?: unknown; organizationId?: string },
): Promise<Response> {
  return call(t, '/api/auth/organization/invite-member', { body, jar: inviter.jar });
}

/** The invitation id from the newest invitation mail to `email` (its link ends in /accept-invitation/<id>). */
export function invitationIdFromMail(t: TestApp, email: string): string {
  const mail = mailsTo(t, email)
    .filter((m) => m.subject.startsWith('Join '))
    .at(-1);
  if (!mail) throw new Error(`no invitation mail for ${email}`);
  const id = new URL(linkIn(mail.text)).pathname.split('/').at(-1);
  if (!id) throw new Error(`no invitation id in ${mail.text}`);
  return id;
}

/**
 * The real invitation flow: `inviter` (default the Owner) invites `user` with
 * `roleSlug`, the mail carries the link, `user` accepts it and makes the
 * organization active. Returns the new membership id.
 */
export async function addMember(
  t: TestApp,
  org: TestOrganization,
  user: SignedInUser,
  roleSlug = 'member',
  inviter: Actor = org.owner,
): Promise<string> {
  await expectStatus(await invite(t, inviter, { email: user.email, role: roleSlug, organizationId: org.id }), 200);
  const invitationId = invitationIdFromMail(t, user.email);
  const accepted = await expectStatus<{ member: { id: string } }>(
    await call(t, '/api/auth/organization/accept-invitation', { body: { invitationId }, jar: user.jar }),
    200,
  );
  await setActive(t, user, org.id);
  return accepted.member.id;
}

/** A new signed-in user who joined `org` with `roleSlug` (active organization set). */
export async function newMember(
  t: TestApp,
  org: TestOrganization,
  roleSlug = 'member',
  options: { name?: string } = {},
) {
  const user = await signedInUser(t, options);
  const memberId = await addMember(t, org, user, roleSlug);
  return { ...user, memberId };
}

export type TestMember = Awaited<ReturnType<typeof newMember>>;

export async function listMembers(t: TestApp, user: Actor): Promise<MemberRecord[]> {
  return expectStatus<MemberRecord[]>(await call(t, '/api/members', { jar: user.jar }), 200);
}

export async function listRoles(t: TestApp, user: Actor): Promise<RoleRecord[]> {
  return expectStatus<RoleRecord[]>(await call(t, '/api/roles', { jar: user.jar }), 200);
}

export async function roleBySlug(t: TestApp, user: Actor, slug: string): Promise<RoleRecord> {
  const role = (await listRoles(t, user)).find((r) => r.slug === slug);
  if (!role) throw new Error(`no role ${slug}`);
  return role;
}

/** memberId -> role slug, as GET /api/members reports it. */
export async function roleSlugsByMember(t: TestApp, user: Actor): Promise<Record<string, string | null>> {
  return Object.fromEntries((await listMembers(t, user)).map((m) => [m.id, m.roleSlug]));
}

export async function sessionPermissions(t: TestApp, user: Actor): Promise<string[]> {
  const session = await expectStatus<{ permissions: string[] } | null>(
    await call(t, '/api/session', { jar: user.jar }),
    200,
  );
  if (!session) throw new Error('signed out');
  return [...session.permissions].sort();
}

/** Creates a custom role as `user` (expects 201). */
export async function createRole(
  t: TestApp,
  user: Actor,
  body: { name: string; description?: string; permissions: string[] },
): Promise<RoleRecord> {
  return expectStatus<RoleRecord>(await call(t, '/api/roles', { body, jar: user.jar }), 201);
}

/**
 * Reads as the schema owner inside a transaction that names `tenantId`:
 * FORCE ROW LEVEL SECURITY binds a non-superuser owner too (the PostgreSQL
 * server's), while PGlite's owner is the superuser and sees everything anyway.
 */
export function asOwnerInTenant<T>(
  t: Pick<TestApp, 'database'>,
  tenantId: string,
  fn: (trx: Kysely<any>) => Promise<T>,
): Promise<T> {
  return t.database.withOwner((owner) =>
    owner.transaction().execute(async (trx) => {
      await sql`select set_config('app.tenant_id', ${tenantId}, true)`.execute(trx);
      return fn(trx);
    }),
  );
}

export interface AuditRow {
  id: string;
  tenant_id: string | null;
  actor_id: string | null;
  action: string;
  metadata: Record<string, any>;
  created_at: Date;
}

/** The organization's audit entries, oldest first (read as owner, in tenant context). */
export function auditRows(t: Pick<TestApp, 'database'>, tenantId: string, action?: string): Promise<AuditRow[]> {
  return asOwnerInTenant(t, tenantId, (trx) => {
    let query = trx.selectFrom('audit_logs').selectAll().where('tenant_id', '=', tenantId);
    if (action) query = query.where('action', '=', action);
    return query.orderBy('created_at').orderBy('id').execute() as Promise<AuditRow[]>;
  });
}

/**
 * The entries about an account (no tenant) that `actorId` caused, oldest first.
 * Read as owner with the actor named: row-level security applies to the owner
 * too on a PostgreSQL server (FORCE), not to the embedded engine's superuser.
 */
export function accountAuditRows(t: Pick<TestApp, 'database'>, actorId: string, action?: string): Promise<AuditRow[]> {
  return t.database.withOwner((owner) =>
    owner.transaction().execute(async (trx) => {
      await sql`select set_config('app.tenant_id', '', true), set_config('app.actor_id', ${actorId}, true)`.execute(
        trx,
      );
      let query = trx
        .selectFrom('audit_logs')
        .selectAll()
        .where('tenant_id', 'is', null)
        .where('actor_id', '=', actorId);
      if (action) query = query.where('action', '=', action);
      return query.orderBy('created_at').orderBy('id').execute() as Promise<AuditRow[]>;
    }),
  );
}

/** The organization's roles with their permission strings, straight from the tables (owner, tenant context). */
export function storedRoles(
  t: Pick<TestApp, 'database'>,
  tenantId: string,
): Promise<
  { id: string; slug: string; name: string; description: string; is_default: boolean; permissions: string[] }[]
> {
  return asOwnerInTenant(t, tenantId, async (trx) => {
    const { rows } = await sql<{
      id: string;
      slug: string;
      name: string;
      description: string;
      is_default: boolean;
      permissions: string[];
    }>`
      select r.id, r.slug, r.name, r.description, r.is_default,
             coalesce(array_agg(p.resource || ':' || p.action order by p.resource || ':' || p.action) filter (where p.id is not null), '{}') as permissions
      from roles r
      left join role_permissions rp on rp.role_id = r.id
      left join permissions p on p.id = rp.permission_id
      where r.tenant_id = ${tenantId}
      group by r.id
      order by r.slug`.execute(trx);
    return rows;
  });
}

/** memberId -> role_id straight from the members table. */
export function storedMemberRoles(
  t: Pick<TestApp, 'database'>,
  organizationId: string,
): Promise<Record<string, string | null>> {
  return t.database.withOwner(async (owner) => {
    const rows = await owner
      .selectFrom('members')
      .select(['id', 'role_id'])
      .where('organization_id', '=', organizationId)
      .execute();
    return Object.fromEntries(rows.map((row: { id: string; role_id: string | null }) => [row.id, row.role_id]));
  });
}

// Oracle: the permission strings, copied from the contract on purpose; the service must agree with them.
export const ALL_PERMISSIONS = [
  'api_keys:read',
  'api_keys:write',
  'invitations:delete',
  'invitations:read',
  'invitations:write',
  'members:delete',
  'members:read',
  'members:write',
  'organizations:delete',
  'organizations:read',
  'organizations:write',
  'roles:delete',
  'roles:read',
  'roles:write',
  'users:delete',
  'users:read',
  'users:write',
];
export const ADMIN_PERMISSIONS = ALL_PERMISSIONS.filter((p) => p !== 'organizations:delete' && p !== 'users:delete');
export const READ_PERMISSIONS = ALL_PERMISSIONS.filter((p) => p.endsWith(':read'));
