import { type Insertable, type Kysely, type Selectable, sql, type Transaction, type Updateable } from 'kysely';
import { ApiError, type ErrorDetail } from '../../shared/errors.js';
import { assertGrantable, bypassesPermissions } from '../../shared/permissions.js';
import type { EnrichedSession } from '../../shared/types.js';
import { runInTransaction } from '../ambient.js';
import { recordAudit } from '../audit.js';
import type { Database } from '../database.js';
import type { OidcMetadata, SsoConnectionsTable, SsoRoleMapping } from '../sso-tables.js';
import { withTenant } from '../tenant.js';
import { listRoles } from './roles.js';

/** What the management routes answer from: every column but the sealed client secret. */
const CONNECTION_COLUMNS = [
  'id',
  'type',
  'name',
  'enabled',
  'default_role_id',
  'role_mappings',
  'mfa_at_idp',
  'allow_idp_initiated',
  'oidc_issuer',
  'oidc_client_id',
  'oidc_scopes',
  'saml_idp_entity_id',
  'saml_entry_point',
  'created_at',
  'updated_at',
] as const;

export type ConnectionRow = Pick<Selectable<SsoConnectionsTable>, (typeof CONNECTION_COLUMNS)[number]>;
/** The jsonb columns as values: written as jsonb here. */
interface JsonColumns {
  role_mappings?: SsoRoleMapping[];
  oidc_metadata?: OidcMetadata;
}
/** The columns a creation sets. */
export type NewConnection = Omit<Insertable<SsoConnectionsTable>, 'tenant_id' | keyof JsonColumns> & JsonColumns;
export type ConnectionChanges = Omit<Updateable<SsoConnectionsTable>, 'id' | 'tenant_id' | 'type' | keyof JsonColumns> &
  JsonColumns;

/** Who acts: the organization, and the session whose permissions bound the roles it may map people to. */
export interface ConnectionActor {
  tenantId: string;
  caller: EnrichedSession;
}

const notFound = () => new ApiError('NOT_FOUND', 'Connection not found');
/** As text, cast by the server (postgres.js binds a string to a jsonb parameter as a JSON string scalar). */
const jsonb = (value: unknown) => sql<string>`${JSON.stringify(value)}::text::jsonb`;

/** The jsonb columns given, as expressions. */
function jsonColumns({ role_mappings, oidc_metadata }: JsonColumns) {
  return {
    ...(role_mappings !== undefined ? { role_mappings: jsonb(role_mappings) } : {}),
    ...(oidc_metadata !== undefined ? { oidc_metadata: jsonb(oidc_metadata) } : {}),
  };
}

/** The role ids a connection hands out, each with the request field that names it. */
function roleRefs(roles: { default_role_id?: string | null; role_mappings?: SsoRoleMapping[] }) {
  return [
    ...(roles.default_role_id ? [{ path: 'defaultRoleId', roleId: roles.default_role_id }] : []),
    ...(roles.role_mappings ?? []).map((m, i) => ({ path: `roleMappings.${i}.roleId`, roleId: m.roleId })),
  ];
}

/**
 * The invitation rule for the roles a connection hands out (docs/sso.md
 * "Connections"): each named role is one of the organization's (else 400),
 * and the caller may grant it (its permissions are the caller's, and the
 * Owner role only an Owner hands out), else an Admin could map an IdP group
 * to Owner. `previous` are the roles the change stops handing out: taking
 * them away is held to the same rule, as a member's role change is.
 */
async function checkRoles(
  trx: Transaction<Database>,
  { tenantId, caller }: ConnectionActor,
  refs: { path: string; roleId: string }[],
  previous: { path: string; roleId: string }[] = [],
) {
  if (refs.length === 0 && previous.length === 0) return;
  const roles = new Map((await listRoles(trx, tenantId)).map((role) => [role.id, role]));
  const unknown: ErrorDetail[] = refs
    .filter((ref) => !roles.has(ref.roleId))
    .map((ref) => ({ path: ref.path, message: 'no such role in this organization' }));
  if (unknown.length > 0) throw new ApiError('VALIDATION_ERROR', 'Unknown role', { details: unknown });
  let callerIsOwner: boolean | undefined;
  for (const { path, roleId } of [...refs, ...previous]) {
    const role = roles.get(roleId);
    if (!role) continue; // Taken away already (a deleted role): nothing to check.
    assertGrantable({ caller, granted: caller.permissions, wanted: role.permissions, path });
    if (role.is_default && role.slug === 'owner' && !bypassesPermissions(caller)) {
      callerIsOwner ??= await isOwner(trx, tenantId, caller.user.id, role.id);
      if (!callerIsOwner)
        throw new ApiError('INSUFFICIENT_PERMISSIONS', 'Insufficient permissions', {
          details: [{ path, message: 'only an Owner maps people to the Owner role' }],
        });
    }
  }
}

async function isOwner(trx: Transaction<Database>, tenantId: string, userId: string, ownerRoleId: string) {
  const row = await trx
    .selectFrom('members')
    .select('id')
    .where('organization_id', '=', tenantId)
    .where('user_id', '=', userId)
    .where('role_id', '=', ownerRoleId)
    .executeTakeFirst();
  return row !== undefined;
}

export function listConnections(db: Kysely<Database>, tenantId: string) {
  return withTenant(db, tenantId, (trx) =>
    trx
      .selectFrom('sso_connections')
      .select(CONNECTION_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at')
      .orderBy('id')
      .execute(),
  );
}

/** The organization's connection, or 404 (another organization's id included). */
export async function getConnection(db: Kysely<Database>, tenantId: string, id: string): Promise<ConnectionRow> {
  const row = await withTenant(db, tenantId, (trx) =>
    trx
      .selectFrom('sso_connections')
      .select(CONNECTION_COLUMNS)
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst(),
  );
  if (!row) throw notFound();
  return row;
}

/** A connection with its roles checked, audited as `sso.connection_created` (no secret, certificate or XML). */
export function createConnection(db: Kysely<Database>, values: NewConnection, actor: ConnectionActor) {
  return withTenant(db, actor.tenantId, async (trx) => {
    await checkRoles(trx, actor, roleRefs(values));
    const { role_mappings = [], oidc_metadata, ...rest } = values;
    const row = await trx
      .insertInto('sso_connections')
      .values({ ...rest, tenant_id: actor.tenantId, ...jsonColumns({ role_mappings, oidc_metadata }) })
      .returning(CONNECTION_COLUMNS)
      .executeTakeFirstOrThrow();
    await recordAudit(trx, {
      action: 'sso.connection_created',
      actorId: actor.caller.user.id,
      organizationId: actor.tenantId,
      metadata: { connectionId: row.id, type: row.type, name: row.name },
    });
    return row;
  });
}

/**
 * Applies `changes` (built by the caller from the request's `fields`),
 * audited as `sso.connection_updated` with the names of the fields. Disabling
 * deletes the sessions the connection created, in the same transaction: a
 * disabled IdP signs nobody in, nor keeps anybody signed in.
 */
export function updateConnection(
  db: Kysely<Database>,
  id: string,
  changes: ConnectionChanges,
  fields: string[],
  actor: ConnectionActor,
) {
  return withTenant(db, actor.tenantId, async (trx) => {
    const current = await trx
      .selectFrom('sso_connections')
      .select(['default_role_id', 'role_mappings'])
      .where('tenant_id', '=', actor.tenantId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!current) throw notFound();
    const previous = roleRefs({
      ...(changes.default_role_id !== undefined ? { default_role_id: current.default_role_id } : {}),
      ...(changes.role_mappings !== undefined ? { role_mappings: current.role_mappings } : {}),
    });
    await checkRoles(trx, actor, roleRefs(changes), previous);
    const { role_mappings, oidc_metadata, ...rest } = changes;
    const row = await trx
      .updateTable('sso_connections')
      .set({ ...rest, ...jsonColumns({ role_mappings, oidc_metadata }), updated_at: new Date() })
      .where('tenant_id', '=', actor.tenantId)
      .where('id', '=', id)
      .returning(CONNECTION_COLUMNS)
      .executeTakeFirstOrThrow();
    const ended = changes.enabled === false ? await endSessions(trx, id) : 0;
    await recordAudit(trx, {
      action: 'sso.connection_updated',
      actorId: actor.caller.user.id,
      organizationId: actor.tenantId,
      metadata: { connectionId: id, type: row.type, name: row.name, fields: [...fields].sort(), sessionsEnded: ended },
    });
    return row;
  });
}

async function endSessions(trx: Transaction<Database>, connectionId: string): Promise<number> {
  const { numDeletedRows } = await trx
    .deleteFrom('sessions')
    .where('sso_connection_id', '=', connectionId)
    .executeTakeFirst();
  return Number(numDeletedRows);
}

/** Deletes a connection, audited as `sso.connection_deleted`; its sessions go with it (ON DELETE CASCADE). */
export function deleteConnection(db: Kysely<Database>, id: string, actor: ConnectionActor) {
  return withTenant(db, actor.tenantId, async (trx) => {
    const row = await trx
      .deleteFrom('sso_connections')
      .where('tenant_id', '=', actor.tenantId)
      .where('id', '=', id)
      .returning(['type', 'name'])
      .executeTakeFirst();
    if (!row) throw notFound();
    await recordAudit(trx, {
      action: 'sso.connection_deleted',
      actorId: actor.caller.user.id,
      organizationId: actor.tenantId,
      metadata: { connectionId: id, type: row.type, name: row.name },
    });
  });
}

/**
 * A connection's type by its id alone, whatever the organization (the
 * public SAML metadata route names no tenant): sso_connection_by_id names
 * the one row for row-level security, for this transaction only.
 */
export async function connectionTypeById(db: Kysely<Database>, id: string): Promise<'oidc' | 'saml' | undefined> {
  const { rows } = await runInTransaction(db, (trx) =>
    sql<{ type: 'oidc' | 'saml' }>`select type from sso_connection_by_id(${id}::uuid)`.execute(trx),
  );
  return rows[0]?.type;
}
