import { z } from '@hono/zod-openapi';
import { PLATFORM_ROLES } from '../auth/permissions.js';
import { sql, type Kysely } from 'kysely';
import { recordAudit } from '../audit.js';
import { runInTransaction } from '../db/ambient.js';
import type { DB } from '../db/database.js';
import { purgeAccount, purgeAfter } from '../db/queries/accounts.js';
import { ApiError } from '../errors.js';
import { access, sessionOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import type { Clock } from '../types.js';

const ProfileSchema = z
  .object({
    id: z.uuid(),
    email: z.string(),
    name: z.string(),
    role: z.enum(PLATFORM_ROLES),
    emailVerified: z.boolean(),
    deletedAt: z.iso.datetime().nullable(),
  })
  .openapi('Profile');

const allowlisted = access.session({ allowScheduledForDeletion: true });

const profileRoute = defineRoute({
  method: 'get',
  path: '/api/users/me',
  access: allowlisted,
  summary: 'Your profile',
  responses: { 200: jsonContent(ProfileSchema, 'The profile') },
});

const scheduleRoute = defineRoute({
  method: 'post',
  path: '/api/users/me/deletion',
  access: access.session(),
  summary: 'Schedule your account for deletion',
  responses: {
    202: jsonContent(z.object({ deletedAt: z.iso.datetime(), purgeAfter: z.iso.datetime() }), 'Scheduled; the account is purged after the grace period'),
  },
});

const reactivateRoute = defineRoute({
  method: 'post',
  path: '/api/users/me/reactivate',
  access: allowlisted,
  summary: 'Cancel a scheduled deletion',
  responses: { 200: jsonContent(ProfileSchema, 'The profile, with deletedAt null') },
});

const exportRoute = defineRoute({
  method: 'get',
  path: '/api/users/me/export',
  access: allowlisted,
  summary: 'Export your own data',
  responses: {
    200: jsonContent(
      z.object({
        profile: ProfileSchema,
        memberships: z.array(
          z.object({
            memberId: z.uuid(),
            organizationId: z.uuid(),
            organizationName: z.string(),
            organizationSlug: z.string(),
            roleId: z.uuid().nullable(),
            roleSlug: z.string().nullable(),
            roleName: z.string().nullable(),
            joinedAt: z.iso.datetime(),
          }),
        ),
        apiKeys: z.array(
          z.object({
            id: z.uuid(),
            organizationId: z.uuid(),
            name: z.string(),
            scopes: z.array(z.string()),
            expiresAt: z.iso.datetime().nullable(),
            lastFour: z.string(),
            createdAt: z.iso.datetime(),
            revokedAt: z.iso.datetime().nullable(),
          }),
        ),
        auditEntries: z.array(
          z.object({ id: z.uuid(), action: z.string(), organizationId: z.uuid().nullable(), metadata: z.record(z.string(), z.unknown()), createdAt: z.iso.datetime() }),
        ),
      }),
      "The caller's own data; no secrets, nobody else's data",
    ),
  },
});

const purgeRoute = defineRoute({
  method: 'post',
  path: '/api/users/me/purge',
  access: allowlisted,
  summary: 'Purge your scheduled account now (confirm with your email)',
  request: { body: { content: { 'application/json': { schema: z.object({ confirmEmail: z.string().min(1).max(320) }).strict().openapi('PurgeConfirmation') } } } },
  responses: { 200: jsonContent(z.object({ purged: z.literal(true) }), 'The account is gone') },
});

const iso = (value: Date | null) => (value ? new Date(value).toISOString() : null);

async function profile(db: Kysely<DB>, userId: string) {
  const user = await db.selectFrom('users').select(['id', 'email', 'name', 'role', 'email_verified', 'deleted_at']).where('id', '=', userId).executeTakeFirst();
  if (!user) throw new ApiError('UNAUTHORIZED', 'Authentication required');
  return { id: user.id, email: user.email, name: user.name, role: user.role, emailVerified: user.email_verified, deletedAt: iso(user.deleted_at) };
}

/** API.md users/me rows; spec §3 "Account scheduled for deletion". */
export function userRoutes({ db, clock, graceDays }: { db: Kysely<DB>; clock: Clock; graceDays: number }) {
  return createRouter()
    .openapi(profileRoute, async (c) => c.json(await profile(db, sessionOf(c).user.id), 200))
    .openapi(scheduleRoute, async (c) => {
      const session = sessionOf(c);
      const deletedAt = clock();
      await runInTransaction(db, async (trx) => {
        await trx.updateTable('users').set({ deleted_at: deletedAt, updated_at: deletedAt }).where('id', '=', session.user.id).execute();
        await recordAudit(trx, {
          action: 'account.deletion_scheduled',
          actorId: session.user.id,
          organizationId: null,
          metadata: { userId: session.user.id, purgeAfter: purgeAfter(deletedAt, graceDays).toISOString() },
          requestId: c.get('requestId'),
        });
      });
      return c.json({ deletedAt: deletedAt.toISOString(), purgeAfter: purgeAfter(deletedAt, graceDays).toISOString() }, 202);
    })
    .openapi(reactivateRoute, async (c) => {
      const session = sessionOf(c);
      await runInTransaction(db, async (trx) => {
        const cleared = await trx
          .updateTable('users')
          .set({ deleted_at: null, updated_at: clock() })
          .where('id', '=', session.user.id)
          .where('deleted_at', 'is not', null)
          .executeTakeFirst();
        if (cleared.numUpdatedRows > 0n) {
          await recordAudit(trx, { action: 'account.reactivated', actorId: session.user.id, organizationId: null, metadata: { userId: session.user.id }, requestId: c.get('requestId') });
        }
      });
      return c.json(await profile(db, session.user.id), 200);
    })
    .openapi(exportRoute, async (c) => {
      const userId = sessionOf(c).user.id;
      const data = await runInTransaction(db, async (trx) => {
        const memberships = await trx
          .selectFrom('members as m')
          .innerJoin('organizations as o', 'o.id', 'm.organization_id')
          .select(['m.id', 'm.organization_id', 'o.name', 'o.slug', 'm.role_id', 'm.created_at'])
          .where('m.user_id', '=', userId)
          .orderBy('m.created_at')
          .execute();
        const roles = new Map<string, { slug: string; name: string }>();
        for (const m of memberships) {
          if (!m.role_id) continue;
          await sql`select set_config('app.tenant_id', ${m.organization_id}, true)`.execute(trx);
          const role = await trx.selectFrom('roles').select(['slug', 'name']).where('id', '=', m.role_id).executeTakeFirst();
          if (role) roles.set(m.role_id, role);
        }
        // No tenant named: the key and audit policies admit the caller's own rows (migrations 0003, 0004).
        await sql`select set_config('app.tenant_id', '', true), set_config('app.key_owner_id', ${userId}, true), set_config('app.actor_id', ${userId}, true)`.execute(trx);
        const keys = await trx
          .selectFrom('api_keys')
          .select(['id', 'tenant_id', 'name', 'scopes', 'expires_at', 'last_four', 'created_at', 'revoked_at'])
          .where('created_by', '=', userId)
          .orderBy('created_at')
          .execute();
        const audit = await trx
          .selectFrom('audit_logs')
          .select(['id', 'action', 'tenant_id', 'metadata', 'created_at'])
          .where('actor_id', '=', userId)
          .orderBy('created_at')
          .orderBy('id')
          .execute();
        return { memberships, roles, keys, audit };
      });
      return c.json(
        {
          profile: await profile(db, userId),
          memberships: data.memberships.map((m) => {
            const role = m.role_id ? data.roles.get(m.role_id) : undefined;
            return {
              memberId: m.id,
              organizationId: m.organization_id,
              organizationName: m.name,
              organizationSlug: m.slug,
              roleId: m.role_id,
              roleSlug: role?.slug ?? null,
              roleName: role?.name ?? null,
              joinedAt: m.created_at.toISOString(),
            };
          }),
          apiKeys: data.keys.map((k) => ({
            id: k.id,
            organizationId: k.tenant_id,
            name: k.name,
            scopes: k.scopes,
            expiresAt: iso(k.expires_at),
            lastFour: k.last_four,
            createdAt: k.created_at.toISOString(),
            revokedAt: iso(k.revoked_at),
          })),
          auditEntries: data.audit.map((a) => ({ id: a.id, action: a.action, organizationId: a.tenant_id, metadata: a.metadata, createdAt: a.created_at.toISOString() })),
        },
        200,
      );
    })
    .openapi(purgeRoute, async (c) => {
      const session = sessionOf(c);
      const { confirmEmail } = c.req.valid('json');
      if (!session.deletedAt) {
        throw new ApiError('VALIDATION_ERROR', 'Only an account scheduled for deletion can be purged', { details: [{ path: 'deletedAt', message: 'schedule deletion first' }] });
      }
      if (confirmEmail.trim().toLowerCase() !== session.user.email.toLowerCase()) {
        throw new ApiError('VALIDATION_ERROR', 'Request validation failed', { details: [{ path: 'confirmEmail', message: 'does not match the account email' }] });
      }
      await purgeAccount(db, { userId: session.user.id, actorId: session.user.id, requestId: c.get('requestId') });
      return c.json({ purged: true as const }, 200);
    });
}
