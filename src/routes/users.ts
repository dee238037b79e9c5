import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import { canonicalEmail } from '../auth/email-address.js';
import type { Database } from '../db/database.js';
import {
  exportAccount,
  findProfile,
  purgeAccount,
  purgeAfter,
  reactivate,
  scheduleDeletion,
} from '../db/queries/accounts.js';
import { access, sessionOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import { ApiError } from '../shared/errors.js';
import { PLATFORM_ROLES } from '../shared/permissions.js';
import type { Clock } from '../shared/types.js';
import { isoOrNull, SecondFactorsExportSchema, secondFactorsJson } from './schemas.js';

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
  // The account's existence (docs/security.md "Sensitive actions and step-up").
  access: access.session({ sensitive: true }),
  summary: 'Schedule your account for deletion',
  responses: {
    202: jsonContent(
      z.object({ deletedAt: z.iso.datetime(), purgeAfter: z.iso.datetime() }),
      'Scheduled; the account is purged after the grace period',
    ),
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
          z.object({
            id: z.uuid(),
            action: z.string(),
            organizationId: z.uuid().nullable(),
            metadata: z.record(z.string(), z.unknown()),
            createdAt: z.iso.datetime(),
          }),
        ),
        ...SecondFactorsExportSchema,
      }),
      "The caller's own data; no secrets, nobody else's data",
    ),
  },
});

const purgeRoute = defineRoute({
  method: 'post',
  path: '/api/users/me/purge',
  access: access.session({ allowScheduledForDeletion: true, sensitive: true }),
  summary: 'Purge your scheduled account now (confirm with your email)',
  request: {
    body: {
      content: {
        'application/json': {
          schema: z
            .object({ confirmEmail: z.string().min(1).max(320) })
            .strict()
            .openapi('PurgeConfirmation'),
        },
      },
    },
  },
  responses: { 200: jsonContent(z.object({ purged: z.literal(true) }), 'The account is gone') },
});

async function profile(db: Kysely<Database>, userId: string) {
  const user = await findProfile(db, userId);
  if (!user) throw new ApiError('UNAUTHORIZED', 'Authentication required');
  return {
    id: user.id,
    email: user.email,
    name: user.name,
    role: user.role,
    emailVerified: user.email_verified,
    deletedAt: isoOrNull(user.deleted_at),
  };
}

/** docs/api.md "Accounts scheduled for deletion": the /api/users/me routes. */
export function userRoutes({ db, clock, graceDays }: { db: Kysely<Database>; clock: Clock; graceDays: number }) {
  return createRouter()
    .openapi(profileRoute, async (c) => c.json(await profile(db, sessionOf(c).user.id), 200))
    .openapi(scheduleRoute, async (c) => {
      const session = sessionOf(c);
      const deletedAt = clock();
      await scheduleDeletion(db, {
        userId: session.user.id,
        at: deletedAt,
        purgeAfter: purgeAfter(deletedAt, graceDays),
      });
      return c.json(
        { deletedAt: deletedAt.toISOString(), purgeAfter: purgeAfter(deletedAt, graceDays).toISOString() },
        202,
      );
    })
    .openapi(reactivateRoute, async (c) => {
      const session = sessionOf(c);
      await reactivate(db, { userId: session.user.id, at: clock() });
      return c.json(await profile(db, session.user.id), 200);
    })
    .openapi(exportRoute, async (c) => {
      const userId = sessionOf(c).user.id;
      const data = await exportAccount(db, userId);
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
            expiresAt: isoOrNull(k.expires_at),
            lastFour: k.last_four,
            createdAt: k.created_at.toISOString(),
            revokedAt: isoOrNull(k.revoked_at),
          })),
          auditEntries: data.audit.map((a) => ({
            id: a.id,
            action: a.action,
            organizationId: a.tenant_id,
            metadata: a.metadata,
            createdAt: a.created_at.toISOString(),
          })),
          ...secondFactorsJson(data.secondFactors),
        },
        200,
      );
    })
    .openapi(purgeRoute, async (c) => {
      const session = sessionOf(c);
      const { confirmEmail } = c.req.valid('json');
      if (!session.deletedAt) {
        throw new ApiError('VALIDATION_ERROR', 'Only an account scheduled for deletion can be purged', {
          details: [{ path: 'deletedAt', message: 'schedule deletion first' }],
        });
      }
      if (canonicalEmail(confirmEmail) !== canonicalEmail(session.user.email)) {
        throw new ApiError('VALIDATION_ERROR', 'Request validation failed', {
          details: [{ path: 'confirmEmail', message: 'does not match the account email' }],
        });
      }
      await purgeAccount(db, { userId: session.user.id, actorId: session.user.id });
      return c.json({ purged: true as const }, 200);
    });
}
