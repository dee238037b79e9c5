import { z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/database.js';
import { groupFilterSql } from '../db/queries/scim-filter-sql.js';
import {
  getGroup,
  groupNameTaken,
  listGroups,
  MAX_LISTED_MEMBERSHIPS,
  type ScimGroupRecord,
  unknownScimUsers,
} from '../db/queries/scim-group-reads.js';
import { createGroup, deleteGroup, type GroupChanges, updateGroup } from '../db/queries/scim-groups.js';
import { tokenActor } from '../db/queries/scim-membership.js';
import { withTenant } from '../db/tenant.js';
import { access, guard, tenantOf } from '../middleware/guard.js';
import { scimJson, scimNoContent, scimOf } from '../middleware/scim.js';
import { createRouter } from '../router.js';
import { ScimError } from '../scim/errors.js';
import { parseScimFilter } from '../scim/filter.js';
import { GROUP_FILTER_ATTRIBUTES } from '../scim/filter-attributes.js';
import { applyScimPatch, parseScimPatch } from '../scim/patch.js';
import {
  etagOf,
  GROUP_SCHEMA,
  ifMatchAllows,
  listResponse,
  locationOf,
  metaOf,
  parsePaging,
  resourceId,
} from '../scim/resources.js';
import { displayName, line } from '../shared/text.js';
import type { AppEnv } from '../shared/types.js';

const MemberRef = z.looseObject({ value: z.string().min(1).max(100) });
/** RFC 7643 section 4.2; what a directory sends besides (`schemas`, `id`, `meta`) is ignored. */
const GroupBody = z.looseObject({
  displayName: displayName(256),
  externalId: line(256).min(1).nullish(),
  members: z.array(MemberRef).max(10_000).nullish(),
});

const wholeGroup = (body: z.infer<typeof GroupBody>): GroupChanges => ({
  displayName: body.displayName,
  externalId: body.externalId ?? null,
  members: (body.members ?? []).map((m) => m.value),
});

function groupResource(authUrl: string, group: ScimGroupRecord) {
  return {
    schemas: [GROUP_SCHEMA],
    id: group.id,
    displayName: group.display_name,
    ...(group.external_id !== null ? { externalId: group.external_id } : {}),
    ...(group.members && { members: group.members.map((m) => ({ ...m, $ref: locationOf(authUrl, 'User', m.value) })) }),
    meta: metaOf(authUrl, 'Group', { ...group, created: group.created_at, lastModified: group.updated_at }),
  };
}

function parseBody<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  throw new ScimError(400, 'invalidValue', `${issue.path.join('.') || 'body'}: ${issue.message}`);
}

/** Members must be SCIM Users of the organization, a name free in it (regardless of case). */
async function check(trx: Transaction<Database>, tenantId: string, changes: GroupChanges, groupId?: string) {
  if (await groupNameTaken(trx, tenantId, changes.displayName, groupId))
    throw new ScimError(409, 'uniqueness', `A group named ${JSON.stringify(changes.displayName)} exists already`);
  const unknown = await unknownScimUsers(trx, tenantId, changes.members);
  if (unknown.length > 0)
    throw new ScimError(400, 'invalidValue', `Not a User of this organization: ${unknown.slice(0, 5).join(', ')}`);
}

/** The unique index settles two requests naming one group at once: the second is told as the check would. */
function nameRace(error: unknown): never {
  // postgres.js names the constraint `constraint_name`, PGlite `constraint`.
  const { code, constraint, constraint_name } = (error ?? {}) as Record<string, unknown>;
  if (code === '23505' && (constraint ?? constraint_name) === 'scim_groups_display_name_key')
    throw new ScimError(409, 'uniqueness', 'A group with this displayName exists already');
  throw error;
}

export interface ScimGroupRouteDeps {
  db: Kysely<Database>;
  /** AUTH_URL: `meta.location` and `$ref` are absolute. */
  authUrl: string;
}

/** docs/scim.md "Groups": `/api/scim/v2/Groups`, one transaction per request. */
export function scimGroupRoutes({ db, authUrl }: ScimGroupRouteDeps) {
  const scim = guard(access.scim());
  const answer = (c: Context<AppEnv>, group: ScimGroupRecord, status: 200 | 201 = 200) =>
    scimJson(c, groupResource(authUrl, group), status, {
      ETag: etagOf(group.version),
      ...(status === 201 ? { Location: locationOf(authUrl, 'Group', group.id) } : {}),
    });
  const notFound = () => new ScimError(404, undefined, 'Group not found');
  /** The path's id; one that is no UUID names no Group. */
  const idOf = (c: Context<AppEnv>) => {
    const id = resourceId(c.req.param('id'));
    if (!id) throw notFound();
    return id;
  };
  /** The group locked for this request, if If-Match lets the change through (412 otherwise). */
  const locked = async (c: Context<AppEnv>, trx: Transaction<Database>) => {
    const row = await getGroup(trx, tenantOf(c), idOf(c), { lock: true });
    if (!row) throw notFound();
    if (!ifMatchAllows(c.req.header('if-match'), row.version))
      throw new ScimError(412, undefined, 'The group has changed since that version');
    return row;
  };
  const json = async (c: Context<AppEnv>) => {
    try {
      return await c.req.json();
    } catch {
      throw new ScimError(400, 'invalidSyntax', 'The body is not JSON');
    }
  };

  return createRouter()
    .get('/api/scim/v2/Groups', scim, async (c) => {
      const tenantId = tenantOf(c);
      const paging = parsePaging({ startIndex: c.req.query('startIndex'), count: c.req.query('count') });
      const excluded = (c.req.query('excludedAttributes') ?? '').split(',').map((a) => a.trim().toLowerCase());
      const query = c.req.query('filter');
      const filter = query === undefined ? undefined : groupFilterSql(parseScimFilter(query, GROUP_FILTER_ATTRIBUTES));
      const { total, groups } = await withTenant(db, tenantId, (trx) =>
        listGroups(trx, tenantId, {
          filter,
          offset: paging.offset,
          limit: paging.count,
          members: !excluded.includes('members'),
        }),
      );
      if (!groups)
        throw new ScimError(
          400,
          'tooMany',
          `These groups hold more than ${MAX_LISTED_MEMBERSHIPS} members: ask for fewer (count), or excludedAttributes=members`,
        );
      const body = listResponse(
        groups.map((g) => groupResource(authUrl, g)),
        { totalResults: total, paging },
      );
      return scimJson(c, body);
    })
    .get('/api/scim/v2/Groups/:id', scim, async (c) => {
      const tenantId = tenantOf(c);
      const excluded = (c.req.query('excludedAttributes') ?? '').toLowerCase().includes('members');
      const id = idOf(c);
      const group = await withTenant(db, tenantId, (trx) => getGroup(trx, tenantId, id, { members: !excluded }));
      if (!group) throw notFound();
      return answer(c, group);
    })
    .post('/api/scim/v2/Groups', scim, async (c) => {
      const body = parseBody(GroupBody, await json(c));
      const actor = tokenActor(scimOf(c));
      const input = wholeGroup(body);
      const group = await withTenant(db, actor.tenantId, async (trx) => {
        await check(trx, actor.tenantId, input);
        return createGroup(trx, actor, input);
      }).catch(nameRace);
      return answer(c, group, 201);
    })
    .put('/api/scim/v2/Groups/:id', scim, async (c) => {
      const body = parseBody(GroupBody, await json(c));
      const actor = tokenActor(scimOf(c));
      const changes = wholeGroup(body);
      const group = await withTenant(db, actor.tenantId, async (trx) => {
        const row = await locked(c, trx);
        await check(trx, actor.tenantId, changes, row.id);
        return updateGroup(trx, actor, row, changes);
      }).catch(nameRace);
      return answer(c, group);
    })
    .patch('/api/scim/v2/Groups/:id', scim, async (c) => {
      const operations = parseScimPatch(await json(c), 'Group');
      const actor = tokenActor(scimOf(c));
      const group = await withTenant(db, actor.tenantId, async (trx) => {
        const row = await locked(c, trx);
        // RFC 7644 section 3.5.2 on the group's JSON, then read back as a whole group (a PUT of the result).
        const changes = wholeGroup(parseBody(GroupBody, applyScimPatch(groupResource(authUrl, row), operations)));
        await check(trx, actor.tenantId, changes, row.id);
        return updateGroup(trx, actor, row, changes);
      }).catch(nameRace);
      return answer(c, group);
    })
    .delete('/api/scim/v2/Groups/:id', scim, async (c) => {
      const actor = tokenActor(scimOf(c));
      await withTenant(db, actor.tenantId, async (trx) => deleteGroup(trx, actor, await locked(c, trx)));
      return scimNoContent(c);
    });
}
