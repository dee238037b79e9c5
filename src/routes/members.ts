import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { listMembers, setMemberRole, transferOwnership } from '../db/queries/members.js';
import { access, assertSensitiveAllowed, sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import type { AppEnv } from '../shared/types.js';
import { IdParams, uuidV4 } from './schemas.js';

const MemberSchema = z
  .object({
    id: z.uuid(),
    userId: z.uuid(),
    email: z.string(),
    name: z.string(),
    roleId: z.uuid().nullable(),
    roleSlug: z.string().nullable(),
    createdAt: z.iso.datetime(),
  })
  .openapi('Member');

const RoleChangeBody = z.object({ roleId: uuidV4() }).strict().openapi('MemberRoleChange');
const RoleChangeResult = z
  .object({ memberId: z.uuid(), roleId: z.uuid(), previousRoleId: z.uuid().nullable() })
  .openapi('MemberRoleChangeResult');

/** What the route's declared access cannot say: its sensitivity depends on the roles involved. */
const OWNER_CHANGE =
  'A change that makes or unmakes an Owner is a sensitive action, as an ownership transfer is: ' +
  '403 STEP_UP_REQUIRED (`Recent authentication required`) to a session that has not proved every factor ' +
  'within STEP_UP_MAX_AGE, 403 FORBIDDEN to an API key.';

const listRoute = defineRoute({
  method: 'get',
  path: '/api/members',
  access: access.tenant(['members:read'], { apiKeys: true }),
  summary: 'Members of the active organization',
  responses: { 200: jsonContent(z.array(MemberSchema), 'Members with their role') },
});

const changeRoute = defineRoute({
  method: 'patch',
  path: '/api/admin/members/{memberId}',
  access: access.tenant(['members:write'], { apiKeys: true }),
  summary: "Change a member's role",
  description: OWNER_CHANGE,
  request: {
    params: z.object({ memberId: uuidV4().openapi({ param: { name: 'memberId', in: 'path' } }) }),
    body: { content: { 'application/json': { schema: RoleChangeBody } } },
  },
  responses: { 200: jsonContent(RoleChangeResult, 'The role changed') },
});

const deprecatedChangeRoute = defineRoute({
  method: 'patch',
  path: '/api/roles/members/{id}/role',
  access: access.tenant(['members:write'], { apiKeys: true }),
  summary: "Change a member's role (deprecated: use PATCH /api/admin/members/{memberId})",
  description: OWNER_CHANGE,
  deprecated: true,
  request: {
    params: IdParams,
    body: { content: { 'application/json': { schema: RoleChangeBody } } },
  },
  responses: {
    200: {
      ...jsonContent(RoleChangeResult, 'The role changed; Deprecation and Link headers name the successor'),
      headers: {
        Deprecation: {
          description: 'Always `true`: this route is deprecated',
          schema: { type: 'string', enum: ['true'] },
        },
        Link: {
          description:
            'The successor route for this member: `</api/admin/members/{memberId}>; rel="successor-version"`',
          schema: {
            type: 'string',
            example: '</api/admin/members/3f2b7c1e-9a4d-4e8b-8c1f-2d6e5a7b9c0d>; rel="successor-version"',
          },
        },
      },
    },
  },
});

const transferRoute = defineRoute({
  method: 'post',
  path: '/api/roles/transfer-ownership',
  // docs/security.md "Sensitive actions and step-up".
  access: access.tenant(['members:write'], { apiKeys: false, sensitive: true }),
  summary: 'Hand ownership to an Admin (the caller must be the current Owner)',
  request: {
    body: {
      content: {
        'application/json': { schema: z.object({ targetMemberId: uuidV4() }).strict().openapi('TransferOwnership') },
      },
    },
  },
  responses: {
    200: jsonContent(
      z.object({ transferred: z.literal(true), previousOwnerMemberId: z.uuid(), newOwnerMemberId: z.uuid() }),
      'Owner and Admin swapped',
    ),
  },
});

/** docs/api.md "Members and ownership". */
export function memberRoutes({ db }: { db: Kysely<Database> }) {
  const change = (c: Context<AppEnv>, memberId: string, roleId: string) => {
    const actor = sessionOf(c);
    return setMemberRole(db, {
      tenantId: tenantOf(c),
      memberId,
      roleId,
      actor,
      // Making or unmaking an Owner hands over or takes away the organization:
      // as sensitive as POST /api/roles/transfer-ownership (no key, a fresh session).
      makesOrUnmakesOwner: () => assertSensitiveAllowed(actor),
    });
  };

  return createRouter()
    .openapi(listRoute, async (c) => {
      const tenantId = tenantOf(c);
      const members = await listMembers(db, tenantId);
      return c.json(
        members.map((m) => ({
          id: m.id,
          userId: m.user_id,
          email: m.email,
          name: m.name,
          roleId: m.role_id,
          roleSlug: m.role_slug,
          createdAt: m.created_at.toISOString(),
        })),
        200,
      );
    })
    .openapi(changeRoute, async (c) => {
      const { memberId } = c.req.valid('param');
      return c.json(await change(c, memberId, c.req.valid('json').roleId), 200);
    })
    .openapi(deprecatedChangeRoute, async (c) => {
      const { id } = c.req.valid('param');
      const result = await change(c, id, c.req.valid('json').roleId);
      c.header('Deprecation', 'true');
      c.header('Link', `</api/admin/members/${id}>; rel="successor-version"`);
      return c.json(result, 200);
    })
    .openapi(transferRoute, async (c) => {
      const actor = sessionOf(c);
      const tenantId = tenantOf(c);
      const { targetMemberId } = c.req.valid('json');
      const result = await transferOwnership(db, {
        tenantId,
        userId: actor.user.id,
        targetMemberId,
      });
      return c.json(result, 200);
    });
}
