import type { Context } from 'hono';
import type { Kysely, Transaction } from 'kysely';
import { canonicalEmail, keepsItsCase } from '../auth/email-address.js';
import type { Database } from '../db/database.js';
import { userFilterSql } from '../db/queries/scim-filter-sql.js';
import { MAX_LISTED_MEMBERSHIPS } from '../db/queries/scim-group-reads.js';
import { tokenActor } from '../db/queries/scim-membership.js';
import { getScimUser, listScimUsers } from '../db/queries/scim-user-reads.js';
import { createScimUser, deleteScimUser, ScimUserConflict, updateScimUser } from '../db/queries/scim-users.js';
import { withTenant } from '../db/tenant.js';
import { access, guard, tenantOf } from '../middleware/guard.js';
import { scimJson, scimNoContent, scimOf } from '../middleware/scim.js';
import { createRouter } from '../router.js';
import { ScimError } from '../scim/errors.js';
import { parseScimFilter } from '../scim/filter.js';
import { USER_FILTER_ATTRIBUTES } from '../scim/filter-attributes.js';
import { applyScimPatch, parseScimPatch } from '../scim/patch.js';
import {
  etagOf,
  ifMatchAllows,
  listResponse,
  locationOf,
  parsePaging,
  resourceId,
  userResource,
} from '../scim/resources.js';
import { userChanges, userFromBody } from '../scim/user-input.js';
import { ApiError } from '../shared/errors.js';

import type { AppEnv } from '../shared/types.js';

const notFound = () => new ScimError(404, undefined, 'User not found');

/** The address as every account holds it (docs/security.md "Account linking"); one the service cannot hold is refused. */
function address(userName: string): string {
  const email = canonicalEmail(userName);
  if (!keepsItsCase(email) || email.length > 254 || !/^[^\s@]+@[^\s@]+$/.test(email))
    throw new ScimError(400, 'invalidValue', 'userName must be an email address');
  return email;
}

/** The queries' refusals as SCIM's errors (RFC 7644 section 3.12). */
function refusal(error: unknown): never {
  if (error instanceof ScimUserConflict) {
    if (error.reason === 'uniqueness')
      throw new ScimError(409, 'uniqueness', 'userName is already a member of this organization');
    // RFC 7644 section 3.12 has no scimType for it (`uniqueness` would send a directory to look for the User).
    if (error.reason === 'unprovisionable')
      throw new ScimError(409, undefined, 'This account cannot be provisioned by a directory');
    if (error.reason === 'userNameChange')
      throw new ScimError(400, 'mutability', "userName is the account's email address and does not change");
    throw new ScimError(412, undefined, 'The user has changed since that version');
  }
  if (error instanceof ApiError && error.code === 'OWNERSHIP_CONSTRAINT')
    throw new ScimError(409, 'mutability', 'The organization must keep at least one Owner');
  if (error instanceof ApiError && error.code === 'NOT_FOUND') throw notFound();
  throw error;
}

export interface ScimUserRouteDeps {
  db: Kysely<Database>;
  /** AUTH_URL: `meta.location` is absolute. */
  authUrl: string;
}

/** docs/scim.md "Users": `/api/scim/v2/Users`, one transaction per request. */
export function scimUserRoutes({ db, authUrl }: ScimUserRouteDeps) {
  const scim = guard(access.scim());
  const json = async (c: Context<AppEnv>): Promise<unknown> => {
    try {
      return await c.req.json();
    } catch {
      throw new ScimError(400, 'invalidSyntax', 'The body is not JSON');
    }
  };
  /** The resource as it stands in `trx`, with its ETag (and Location when just created). */
  const answer = async (c: Context<AppEnv>, trx: Transaction<Database>, id: string, status: 200 | 201 = 200) => {
    const user = await getScimUser(trx, tenantOf(c), id);
    if (!user) throw notFound();
    return () =>
      scimJson(c, userResource(authUrl, user), status, {
        ETag: etagOf(user.version),
        ...(status === 201 ? { Location: locationOf(authUrl, 'User', id) } : {}),
      });
  };
  const ifMatch = (c: Context<AppEnv>) => (version: number) => ifMatchAllows(c.req.header('if-match'), version);
  /** A path id that is no UUID names no User (and must not reach a uuid column). */
  const idOf = (c: Context<AppEnv>) => {
    const id = resourceId(c.req.param('id'));
    if (!id) throw notFound();
    return id;
  };

  return createRouter()
    .get('/api/scim/v2/Users', scim, async (c) => {
      const tenantId = tenantOf(c);
      const paging = parsePaging({ startIndex: c.req.query('startIndex'), count: c.req.query('count') });
      const query = c.req.query('filter');
      const filter = userFilterSql(query === undefined ? undefined : parseScimFilter(query, USER_FILTER_ATTRIBUTES));
      const { total, users } = await withTenant(db, tenantId, (trx) =>
        listScimUsers(trx, tenantId, {
          filter,
          offset: paging.offset,
          count: paging.count,
        }),
      );
      if (!users)
        throw new ScimError(
          400,
          'tooMany',
          `These Users are in more than ${MAX_LISTED_MEMBERSHIPS} groups: ask for fewer (count)`,
        );
      const resources = users.map((user) => userResource(authUrl, user));
      return scimJson(c, listResponse(resources, { totalResults: total, paging }));
    })
    .get('/api/scim/v2/Users/:id', scim, async (c) => {
      const id = idOf(c);
      const send = await withTenant(db, tenantOf(c), (trx) => answer(c, trx, id));
      return send();
    })
    .post('/api/scim/v2/Users', scim, async (c) => {
      const fields = userFromBody(await json(c));
      const writer = tokenActor(scimOf(c));
      const input = { ...fields, email: address(fields.userName) };
      const create = () =>
        withTenant(db, writer.tenantId, async (trx) => answer(c, trx, await createScimUser(trx, writer, input), 201));
      // Two requests for one userName at once: the one that lost on a unique key (the
      // address, the membership, the resource) rolled back; again, it finds what the other wrote.
      const send = await create()
        .catch((error: unknown) => {
          if ((error as { code?: unknown })?.code !== '23505') throw error;
          return create();
        })
        .catch(refusal);
      return send();
    })
    .put('/api/scim/v2/Users/:id', scim, async (c) => {
      const id = idOf(c);
      const fields = userFromBody(await json(c));
      const writer = tokenActor(scimOf(c));
      const changes = { ...fields, email: address(fields.userName) };
      const send = await withTenant(db, writer.tenantId, async (trx) => {
        await updateScimUser(trx, writer, id, changes, ifMatch(c));
        return answer(c, trx, id);
      }).catch(refusal);
      return send();
    })
    .patch('/api/scim/v2/Users/:id', scim, async (c) => {
      const id = idOf(c);
      const body = await json(c);
      const writer = tokenActor(scimOf(c));
      const send = await withTenant(db, writer.tenantId, async (trx) => {
        const current = await getScimUser(trx, writer.tenantId, id);
        if (!current) throw notFound();
        const before: Record<string, unknown> = { ...userResource(authUrl, current) };
        const after = applyScimPatch(before, parseScimPatch(body, 'User'));
        const { userName, ...rest } = userChanges(before, after, current.name);
        const changes = { ...rest, ...(userName !== undefined ? { email: address(userName) } : {}) };
        await updateScimUser(trx, writer, id, changes, ifMatch(c));
        return answer(c, trx, id);
      }).catch(refusal);
      return send();
    })
    .delete('/api/scim/v2/Users/:id', scim, async (c) => {
      const id = idOf(c);
      const writer = tokenActor(scimOf(c));
      await withTenant(db, writer.tenantId, (trx) => deleteScimUser(trx, writer, id, ifMatch(c))).catch(refusal);
      return scimNoContent(c);
    });
}
