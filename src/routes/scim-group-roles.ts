import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { listGroupRoles, replaceGroupRoles } from '../db/queries/scim-group-roles.js';
import { access, sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import { uuidV4 } from './schemas.js';

/** The most groups one organization maps to roles. */
const MAX_MAPPINGS = 200;

const GroupRoleSchema = z
  .object({
    groupId: uuidV4().describe("A SCIM Group's id in the organization"),
    roleId: uuidV4().describe("One of the organization's roles"),
  })
  .strict()
  .openapi('ScimGroupRole');
const GroupRolesSchema = z.array(GroupRoleSchema).max(MAX_MAPPINGS);

const listRoute = defineRoute({
  method: 'get',
  path: '/api/scim/group-roles',
  access: access.tenant(['roles:read'], { apiKeys: true }),
  summary: "Which role each of the directory's groups gives its members",
  responses: { 200: jsonContent(GroupRolesSchema, 'Mappings, oldest group first') },
});

const replaceRoute = defineRoute({
  method: 'put',
  path: '/api/scim/group-roles',
  access: access.tenant(['roles:write'], { apiKeys: false }),
  summary: "Replace the mapping from the directory's groups to roles",
  description:
    "A member's role is the highest role of their groups (Owner > Admin > Member > Viewer; between custom " +
    'roles, more permissions), else Member: every member of a group whose role changes gets their role again ' +
    "at once. Groups and roles must be the organization's (400); roles given or taken away must be the " +
    "caller's to grant, Owner only by an Owner (403); the last Owner is never demoted (409 OWNERSHIP_CONSTRAINT).",
  request: { body: { content: { 'application/json': { schema: GroupRolesSchema } }, required: true } },
  responses: { 200: jsonContent(GroupRolesSchema, 'The mapping now') },
});

/** docs/scim.md "Roles". Every query names the tenant; RLS is the second lock. */
export function scimGroupRoleRoutes({ db }: { db: Kysely<Database> }) {
  return createRouter()
    .openapi(listRoute, async (c) => c.json(await listGroupRoles(db, tenantOf(c)), 200))
    .openapi(replaceRoute, async (c) => {
      const mappings = await replaceGroupRoles(db, {
        tenantId: tenantOf(c),
        caller: sessionOf(c),
        mappings: c.req.valid('json'),
      });
      return c.json(mappings, 200);
    });
}
