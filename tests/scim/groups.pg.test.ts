import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import { asOwnerInTenant, auditRows, createOrganization, roleBySlug, type TestOrganization } from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';

/**
 * docs/scim.md "Groups", over HTTP with a directory's token: every verb of
 * /api/scim/v2/Groups, its filters and paging, `excludedAttributes=members`,
 * ETags and If-Match, SCIM's errors (uniqueness, invalidValue, 404, 412), the
 * audit entries (no actor, the token), roles following mapped groups, the last
 * Owner kept, and one organization's token blind to another's groups.
 */
const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';
const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';
const ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error';

interface Group {
  schemas: string[];
  id: string;
  displayName: string;
  externalId?: string;
  members?: { value: string; display: string; $ref: string }[];
  meta: { resourceType: string; created: string; lastModified: string; location: string; version: string };
}
interface ListResponse {
  schemas: string[];
  totalResults: number;
  startIndex: number;
  itemsPerPage: number;
  Resources: Group[];
}

interface Directory {
  org: TestOrganization;
  token: string;
  tokenId: string;
}

describe('SCIM Groups', () => {
  let t: TestApp;
  let a: Directory;
  let b: Directory;

  const scim = (
    dir: Directory,
    path: string,
    { method = 'GET', body, headers = {} }: { method?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) =>
    t.app.request(`/api/scim/v2${path}`, {
      method,
      headers: {
        authorization: `Bearer ${dir.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/scim+json' }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const scimError = async (response: Response, status: number, scimType?: string) => {
    const body = await expectStatus<{ schemas: string[]; status: string; scimType?: string; detail: string }>(
      response,
      status,
    );
    expect(response.headers.get('content-type')).toMatch(/^application\/scim\+json/);
    expect(body).toMatchObject({ schemas: [ERROR], status: String(status), ...(scimType ? { scimType } : {}) });
    return body;
  };
  const createGroup = async (dir: Directory, body: Record<string, unknown>) =>
    expectStatus<Group>(await scim(dir, '/Groups', { method: 'POST', body: { schemas: [GROUP], ...body } }), 201);
  const list = async (dir: Directory, query: string) =>
    expectStatus<ListResponse>(await scim(dir, `/Groups?${query}`), 200);

  /** A directory token of the organization, created by its Owner. */
  const directory = async (org: TestOrganization): Promise<Directory> => {
    const created = await expectStatus<{ id: string; token: string }>(
      await call(t, '/api/scim/tokens', { body: { name: 'Directory' }, jar: org.owner.jar }),
      201,
    );
    return { org, token: created.token, tokenId: created.id };
  };
  /** A SCIM User of the directory's organization, created by the directory (a member, Member). */
  const scimUser = async (dir: Directory, name = 'Ada Lovelace') => {
    const userName = uniqueEmail('scim');
    const body = { schemas: [USER], userName, name: { formatted: name }, active: true };
    const { id } = await expectStatus<{ id: string }>(await scim(dir, '/Users', { method: 'POST', body }), 201);
    return { id, userName, name };
  };
  /** An existing member known to the directory (a SCIM User later made Owner, say): its SCIM row. */
  const linkScimUser = (dir: Directory, userId: string) =>
    asOwnerInTenant(t, dir.org.id, (trx) =>
      trx.insertInto('scim_users').values({ tenant_id: dir.org.id, user_id: userId }).execute(),
    );
  const memberRoles = async (org: TestOrganization) => {
    const members = await expectStatus<{ userId: string; roleSlug: string }[]>(
      await call(t, '/api/members', { jar: org.owner.jar }),
      200,
    );
    return Object.fromEntries(members.map((m) => [m.userId, m.roleSlug]));
  };
  /** The organization's mapping from groups to roles, stored as PUT /api/scim/group-roles stores it. */
  const mapRoles = (dir: Directory, mappings: { groupId: string; roleId: string }[]) =>
    asOwnerInTenant(t, dir.org.id, async (trx) => {
      await trx.deleteFrom('scim_group_roles').where('tenant_id', '=', dir.org.id).execute();
      await trx
        .insertInto('scim_group_roles')
        .values(mappings.map((m) => ({ tenant_id: dir.org.id, group_id: m.groupId, role_id: m.roleId })))
        .execute();
    });

  beforeAll(async () => {
    t = await createTestApp();
    a = await directory(await createOrganization(t, await signedInUser(t)));
    b = await directory(await createOrganization(t, await signedInUser(t)));
  });
  afterAll(() => t.close());

  it('POST creates a group with its members: 201, Location, ETag, the resource, audited with the token', async () => {
    const ada = await scimUser(a, 'Ada Lovelace');
    const response = await scim(a, '/Groups', {
      method: 'POST',
      body: { schemas: [GROUP], displayName: 'Engineering', externalId: 'eng-1', members: [{ value: ada.id }] },
    });
    const group = await expectStatus<Group>(response, 201);
    expect(response.headers.get('content-type')).toMatch(/^application\/scim\+json/);
    expect(response.headers.get('etag')).toBe('W/"1"');
    expect(response.headers.get('location')).toBe(group.meta.location);
    expect(group).toEqual({
      schemas: [GROUP],
      id: expect.any(String),
      displayName: 'Engineering',
      externalId: 'eng-1',
      members: [
        {
          value: ada.id,
          display: 'Ada Lovelace',
          $ref: expect.stringMatching(new RegExp(`/api/scim/v2/Users/${ada.id}$`)),
        },
      ],
      meta: {
        resourceType: 'Group',
        created: expect.any(String),
        lastModified: expect.any(String),
        location: expect.stringMatching(new RegExp(`/api/scim/v2/Groups/${group.id}$`)),
        version: 'W/"1"',
      },
    });
    const [entry] = (await auditRows(t, a.org.id, 'scim.group_created')).filter((r) => r.metadata.groupId === group.id);
    expect(entry).toMatchObject({
      actor_id: null,
      metadata: { groupId: group.id, displayName: 'Engineering', membersAdded: [ada.id], scimTokenId: a.tokenId },
    });

    const read = await scim(a, `/Groups/${group.id}`);
    expect(await expectStatus<Group>(read, 200)).toEqual(group);
    expect(read.headers.get('etag')).toBe('W/"1"');
    const lean = await expectStatus<Group>(await scim(a, `/Groups/${group.id}?excludedAttributes=members`), 200);
    expect(lean.members).toBeUndefined();
    expect(lean.displayName).toBe('Engineering');
  });

  it('displayName is unique in the organization regardless of case (409 uniqueness); other organizations may reuse it', async () => {
    await createGroup(a, { displayName: 'Sales' });
    await scimError(
      await scim(a, '/Groups', { method: 'POST', body: { schemas: [GROUP], displayName: 'SALES' } }),
      409,
      'uniqueness',
    );
    const other = await createGroup(a, { displayName: 'Marketing' });
    await scimError(
      await scim(a, `/Groups/${other.id}`, { method: 'PUT', body: { schemas: [GROUP], displayName: 'sales' } }),
      409,
      'uniqueness',
    );
    await createGroup(b, { displayName: 'Sales' });
  });

  it('two directories creating one name at once: one group, the other told uniqueness', async () => {
    const name = `Race ${crypto.randomUUID().slice(0, 6)}`;
    const post = () => scim(a, '/Groups', { method: 'POST', body: { schemas: [GROUP], displayName: name } });
    const answers = await Promise.all([post(), post()]);
    expect(answers.map((r) => r.status).sort()).toEqual([201, 409]);
    const lost = answers.find((r) => r.status === 409)!;
    expect(await lost.json()).toMatchObject({ status: '409', scimType: 'uniqueness' });
    const filter = encodeURIComponent(`displayName eq "${name}"`);
    expect((await list(a, `filter=${filter}`)).totalResults).toBe(1);
  });

  it('a member must be a SCIM User of the organization (400 invalidValue); nothing is written', async () => {
    const stranger = await scimUser(b);
    const before = (await list(a, 'count=0')).totalResults;
    for (const value of [stranger.id, crypto.randomUUID(), 'not-an-id'])
      await scimError(
        await scim(a, '/Groups', {
          method: 'POST',
          body: { schemas: [GROUP], displayName: `Strangers ${value}`, members: [{ value }] },
        }),
        400,
        'invalidValue',
      );
    await scimError(await scim(a, '/Groups', { method: 'POST', body: { schemas: [GROUP] } }), 400, 'invalidValue');
    expect((await list(a, 'count=0')).totalResults).toBe(before);
  });

  it('lists with startIndex, count and totalResults, oldest first; count=0 answers the total only', async () => {
    const dir = await directory(await createOrganization(t, await signedInUser(t)));
    const names = ['G1', 'G2', 'G3', 'G4', 'G5'];
    for (const displayName of names) await createGroup(dir, { displayName });
    const page = await list(dir, 'startIndex=2&count=2');
    expect(page).toMatchObject({ schemas: [LIST], totalResults: 5, startIndex: 2, itemsPerPage: 2 });
    expect(page.Resources.map((g) => g.displayName)).toEqual(['G2', 'G3']);
    expect((await list(dir, 'startIndex=5&count=10')).Resources.map((g) => g.displayName)).toEqual(['G5']);
    expect(await list(dir, 'count=0')).toEqual({
      schemas: [LIST],
      totalResults: 5,
      startIndex: 1,
      itemsPerPage: 0,
      Resources: [],
    });
    expect((await list(dir, 'startIndex=0')).Resources).toHaveLength(5);
    expect((await list(dir, 'startIndex=9')).Resources).toEqual([]);
  });

  it('filters on displayName, externalId, id, members.value and meta.lastModified', async () => {
    const dir = await directory(await createOrganization(t, await signedInUser(t)));
    const ada = await scimUser(dir);
    const grace = await scimUser(dir, 'Grace Hopper');
    const ops = await createGroup(dir, { displayName: 'Ops Team', externalId: 'X-1', members: [{ value: ada.id }] });
    const dev = await createGroup(dir, {
      displayName: 'Dev Team',
      externalId: 'x-2',
      members: [{ value: ada.id }, { value: grace.id }],
    });
    const names = async (filter: string) =>
      (await list(dir, `filter=${encodeURIComponent(filter)}`)).Resources.map((g) => g.displayName).sort();
    expect(await names('displayName eq "ops team"')).toEqual(['Ops Team']);
    expect(await names('displayName sw "dev"')).toEqual(['Dev Team']);
    expect(await names('displayName co "team" and not (externalId eq "X-1")')).toEqual(['Dev Team']);
    expect(await names('externalId eq "x-1"')).toEqual([]);
    expect(await names('externalId eq "X-1" or externalId eq "x-2"')).toEqual(['Dev Team', 'Ops Team']);
    expect(await names(`id eq "${dev.id}"`)).toEqual(['Dev Team']);
    expect(await names(`members.value eq "${grace.id}"`)).toEqual(['Dev Team']);
    expect(await names(`members[value eq "${ada.id}"]`)).toEqual(['Dev Team', 'Ops Team']);
    expect(await names(`meta.lastModified ge "${ops.meta.lastModified}"`)).toEqual(['Dev Team', 'Ops Team']);
    expect(await names(`meta.lastModified gt "${dev.meta.lastModified}"`)).toEqual([]);
    // Entra checks a group exists by name, and asks without its members.
    const lean = await list(
      dir,
      `filter=${encodeURIComponent('displayName eq "Dev Team"')}&excludedAttributes=members`,
    );
    expect(lean.totalResults).toBe(1);
    expect(lean.Resources[0]!.members).toBeUndefined();
    await scimError(await scim(dir, `/Groups?filter=${encodeURIComponent('title eq "x"')}`), 400, 'invalidFilter');
    await scimError(await scim(dir, `/Groups?filter=${encodeURIComponent('displayName eq')}`), 400, 'invalidFilter');
  });

  it('PUT replaces name, externalId and members; If-Match must name the current version (412)', async () => {
    const ada = await scimUser(a);
    const grace = await scimUser(a, 'Grace Hopper');
    const group = await createGroup(a, { displayName: 'Platform', externalId: 'p', members: [{ value: ada.id }] });
    const replace = (body: Record<string, unknown>, ifMatch?: string) =>
      scim(a, `/Groups/${group.id}`, {
        method: 'PUT',
        body: { schemas: [GROUP], id: group.id, ...body },
        headers: ifMatch ? { 'if-match': ifMatch } : {},
      });
    await scimError(await replace({ displayName: 'Platform 2' }, 'W/"7"'), 412);
    const response = await replace({ displayName: 'Platform 2', members: [{ value: grace.id }] }, 'W/"1"');
    const replaced = await expectStatus<Group>(response, 200);
    expect(response.headers.get('etag')).toBe('W/"2"');
    expect(replaced).toMatchObject({ displayName: 'Platform 2', meta: { version: 'W/"2"' } });
    expect(replaced.externalId).toBeUndefined();
    expect(replaced.members!.map((m) => m.value)).toEqual([grace.id]);
    const [entry] = (await auditRows(t, a.org.id, 'scim.group_updated')).filter((r) => r.metadata.groupId === group.id);
    expect(entry).toMatchObject({
      actor_id: null,
      metadata: {
        fields: ['displayName', 'externalId', 'members'],
        membersAdded: [grace.id],
        membersRemoved: [ada.id],
        scimTokenId: a.tokenId,
      },
    });
    // The same replacement again: nothing changed, no new version, no entry.
    const again = await expectStatus<Group>(
      await replace({ displayName: 'Platform 2', members: [{ value: grace.id }] }),
      200,
    );
    expect(again.meta.version).toBe('W/"2"');
    await scimError(await replace({ displayName: 'Platform 3' }, 'W/"1"'), 412);
  });

  it('DELETE removes the group (204), then 404; If-Match applies', async () => {
    const group = await createGroup(a, { displayName: 'Temporary' });
    await scimError(await scim(a, `/Groups/${group.id}`, { method: 'DELETE', headers: { 'if-match': 'W/"9"' } }), 412);
    const deleted = await scim(a, `/Groups/${group.id}`, { method: 'DELETE' });
    expect(deleted.status).toBe(204);
    await scimError(await scim(a, `/Groups/${group.id}`), 404);
    await scimError(await scim(a, `/Groups/${group.id}`, { method: 'DELETE' }), 404);
    const [entry] = (await auditRows(t, a.org.id, 'scim.group_deleted')).filter((r) => r.metadata.groupId === group.id);
    expect(entry).toMatchObject({ actor_id: null, metadata: { displayName: 'Temporary', scimTokenId: a.tokenId } });
  });

  it("one organization's token neither sees nor changes another's groups (404)", async () => {
    const theirs = await createGroup(b, { displayName: `B only ${crypto.randomUUID().slice(0, 6)}` });
    await scimError(await scim(a, `/Groups/${theirs.id}`), 404);
    await scimError(
      await scim(a, `/Groups/${theirs.id}`, { method: 'PUT', body: { schemas: [GROUP], displayName: 'Mine' } }),
      404,
    );
    await scimError(
      await scim(a, `/Groups/${theirs.id}`, {
        method: 'PATCH',
        body: {
          schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
          Operations: [{ op: 'replace', path: 'displayName', value: 'Mine' }],
        },
      }),
      404,
    );
    await scimError(await scim(a, `/Groups/${theirs.id}`, { method: 'DELETE' }), 404);
    expect((await list(a, `filter=${encodeURIComponent(`id eq "${theirs.id}"`)}`)).totalResults).toBe(0);
    expect((await list(a, 'count=200')).Resources.map((g) => g.id)).not.toContain(theirs.id);
    expect(await expectStatus<Group>(await scim(b, `/Groups/${theirs.id}`), 200)).toMatchObject({
      displayName: theirs.displayName,
    });
  });

  it('members of a mapped group take its role as they join and leave; deleting the group recomputes them', async () => {
    const dir = await directory(await createOrganization(t, await signedInUser(t)));
    const owner = dir.org.owner;
    const r = { admin: await roleBySlug(t, owner, 'admin'), viewer: await roleBySlug(t, owner, 'viewer') };
    const ada = await scimUser(dir);
    const grace = await scimUser(dir, 'Grace Hopper');
    const admins = await createGroup(dir, { displayName: 'Admins' });
    const readers = await createGroup(dir, { displayName: 'Readers' });
    await mapRoles(dir, [
      { groupId: admins.id, roleId: r.admin.id },
      { groupId: readers.id, roleId: r.viewer.id },
    ]);
    await expectStatus(
      await scim(dir, `/Groups/${readers.id}`, {
        method: 'PUT',
        body: { schemas: [GROUP], displayName: 'Readers', members: [{ value: ada.id }, { value: grace.id }] },
      }),
      200,
    );
    expect(await memberRoles(dir.org)).toMatchObject({ [ada.id]: 'viewer', [grace.id]: 'viewer' });
    await expectStatus(
      await scim(dir, `/Groups/${admins.id}`, {
        method: 'PUT',
        body: { schemas: [GROUP], displayName: 'Admins', members: [{ value: ada.id }] },
      }),
      200,
    );
    expect(await memberRoles(dir.org)).toMatchObject({ [ada.id]: 'admin', [grace.id]: 'viewer' });
    const changed = (await auditRows(t, dir.org.id, 'member.role_changed')).at(-1);
    expect(changed).toMatchObject({ actor_id: null, metadata: { roleId: r.admin.id, scimTokenId: dir.tokenId } });
    expect((await scim(dir, `/Groups/${admins.id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await memberRoles(dir.org)).toMatchObject({ [ada.id]: 'viewer', [grace.id]: 'viewer' });
    // With no group mapped any more, groups decide no role: roles stay as they are.
    expect((await scim(dir, `/Groups/${readers.id}`, { method: 'DELETE' })).status).toBe(204);
    expect(await memberRoles(dir.org)).toMatchObject({ [ada.id]: 'viewer', [grace.id]: 'viewer' });
  });

  it('never removes the last Owner from the group that makes them Owner (409); nothing changes', async () => {
    const dir = await directory(await createOrganization(t, await signedInUser(t)));
    const owner = dir.org.owner;
    const ownerRole = await roleBySlug(t, owner, 'owner');
    await linkScimUser(dir, owner.id);
    const owners = await createGroup(dir, { displayName: 'Owners', members: [{ value: owner.id }] });
    const staff = await createGroup(dir, { displayName: 'Staff' });
    await mapRoles(dir, [
      { groupId: owners.id, roleId: ownerRole.id },
      { groupId: staff.id, roleId: (await roleBySlug(t, owner, 'member')).id },
    ]);
    await scimError(
      await scim(dir, `/Groups/${owners.id}`, {
        method: 'PUT',
        body: { schemas: [GROUP], displayName: 'Owners', members: [] },
      }),
      409,
    );
    await scimError(
      await scim(dir, `/Groups/${owners.id}`, {
        method: 'PATCH',
        body: {
          schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
          Operations: [{ op: 'Remove', path: 'members', value: [{ value: owner.id }] }],
        },
      }),
      409,
    );
    await scimError(await scim(dir, `/Groups/${owners.id}`, { method: 'DELETE' }), 409);
    const kept = await expectStatus<Group>(await scim(dir, `/Groups/${owners.id}`), 200);
    expect(kept.members!.map((m) => m.value)).toEqual([owner.id]);
    expect(kept.meta.version).toBe('W/"1"');
    expect(await memberRoles(dir.org)).toMatchObject({ [owner.id]: 'owner' });
  });
});
