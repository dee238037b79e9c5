import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { auditRows, createOrganization, listMembers, type TestOrganization } from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';
import { expectScim, LIST, mintToken, PATCH, type Scim, scimClient, USER } from './users-client.js';

/**
 * docs/scim.md "Users" over HTTP with a real token: every verb, paging,
 * every filter operator, uniqueness, ETags and If-Match, and another
 * organization's token, which finds nothing.
 */

describe('SCIM Users', () => {
  let t: TestApp;
  let org: TestOrganization;
  let other: TestOrganization;
  let scim: Scim;
  let otherScim: Scim;
  let tokenId: string;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
    other = await createOrganization(t, await signedInUser(t));
    const minted = await mintToken(t, org);
    tokenId = minted.id;
    scim = scimClient(t, minted.token);
    otherScim = scimClient(t, (await mintToken(t, other)).token);
  });
  afterAll(async () => {
    await t?.close();
  });

  const create = async (body: Record<string, unknown>) =>
    expectScim(await scim('/Users', { body: { schemas: [USER], ...body } }), 201);

  it('POST creates the verified account without a password, the membership and the resource', async () => {
    const email = uniqueEmail('new');
    const res = await scim('/Users', {
      body: {
        schemas: [USER],
        userName: email.toUpperCase(),
        externalId: 'ext-1',
        name: { givenName: 'Ada', familyName: 'Lovelace' },
      },
    });
    const user = await expectScim(res, 201);
    expect(user).toMatchObject({
      schemas: [USER],
      userName: email,
      externalId: 'ext-1',
      displayName: 'Ada Lovelace',
      name: { formatted: 'Ada Lovelace' },
      emails: [{ value: email, type: 'work', primary: true }],
      active: true,
      groups: [],
      meta: { resourceType: 'User', version: 'W/"1"', location: `${t.config.auth.url}/api/scim/v2/Users/${user.id}` },
    });
    expect(res.headers.get('etag')).toBe('W/"1"');
    expect(res.headers.get('location')).toBe(user.meta.location);
    const member = (await listMembers(t, org.owner)).find((m) => m.userId === user.id);
    expect(member).toMatchObject({ email, roleSlug: 'member' });
    const account = await t.database.withOwner((db) =>
      db.selectFrom('users').select(['email_verified']).where('id', '=', user.id).executeTakeFirstOrThrow(),
    );
    expect(account.email_verified).toBe(true);
    const credentials = await t.database.withOwner((db) =>
      db.selectFrom('accounts').select('id').where('user_id', '=', user.id).execute(),
    );
    expect(credentials).toEqual([]);
    const added = (await auditRows(t, org.id, 'member.added')).find((row) => row.metadata.userId === user.id);
    expect(added).toMatchObject({
      actor_id: null,
      metadata: { scimTokenId: tokenId, via: 'scim', roleSlug: 'member' },
    });
    // GET one, with its ETag.
    const got = await scim(`/Users/${user.id}`);
    expect(await expectScim(got, 200)).toEqual(user);
    expect(got.headers.get('etag')).toBe('W/"1"');
  });

  it('POST of a userName already a member of the organization, in any case: 409 uniqueness', async () => {
    await expectScim(await scim('/Users', { body: { schemas: [USER], userName: org.owner.email } }), 409, 'uniqueness');
    const email = uniqueEmail('twice');
    await create({ userName: email });
    await expectScim(await scim('/Users', { body: { userName: email.toUpperCase() } }), 409, 'uniqueness');
    // Deactivated: still the organization's User.
    const inactive = await create({ userName: uniqueEmail('inactive'), active: false });
    await expectScim(await scim('/Users', { body: { userName: inactive.userName } }), 409, 'uniqueness');
  });

  it('POST of an existing account that is not a member links it (no second account)', async () => {
    const person = await signedInUser(t);
    const user = await create({ userName: person.email, displayName: 'Whatever' });
    expect(user.id).toBe(person.id);
    expect((await listMembers(t, org.owner)).some((m) => m.userId === person.id)).toBe(true);
  });

  it("renames only an account no other organization holds: another organization's member keeps their name", async () => {
    // The other organization's Owner, whom this directory links by address.
    const shared = await create({ userName: other.owner.email });
    const before = shared.displayName;
    const patchName = (id: string, name: string) =>
      scim(`/Users/${id}`, {
        method: 'PATCH',
        body: { schemas: [PATCH], Operations: [{ op: 'replace', path: 'displayName', value: name }] },
      });
    expect((await expectScim(await patchName(shared.id, 'Renamed by a directory'), 200)).displayName).toBe(before);
    const own = await create({ userName: uniqueEmail('own'), displayName: 'Mine' });
    expect((await expectScim(await patchName(own.id, 'Renamed'), 200)).displayName).toBe('Renamed');
  });

  it('PUT replaces; PATCH changes what it names; each change a new version; If-Match enforced', async () => {
    const user = await create({ userName: uniqueEmail('put'), externalId: 'a', displayName: 'Before' });
    await expectScim(
      await scim(`/Users/${user.id}`, {
        method: 'PUT',
        body: { userName: user.userName, displayName: 'X' },
        headers: { 'if-match': 'W/"7"' },
      }),
      412,
    );
    const put = await scim(`/Users/${user.id}`, {
      method: 'PUT',
      body: { ...user, displayName: 'After', externalId: undefined },
      headers: { 'if-match': user.meta.version },
    });
    const replaced = await expectScim(put, 200);
    expect(replaced).toMatchObject({ displayName: 'After', meta: { version: 'W/"2"' } });
    expect(replaced.externalId).toBeUndefined();
    expect(put.headers.get('etag')).toBe('W/"2"');
    const patched = await expectScim(
      await scim(`/Users/${user.id}`, {
        method: 'PATCH',
        body: { schemas: [PATCH], Operations: [{ op: 'add', path: 'externalId', value: 'b' }] },
        headers: { 'if-match': '"2"' },
      }),
      200,
    );
    expect(patched).toMatchObject({ externalId: 'b', displayName: 'After', meta: { version: 'W/"3"' } });
    const same = await expectScim(
      await scim(`/Users/${user.id}`, {
        method: 'PATCH',
        body: { schemas: [PATCH], Operations: [{ op: 'replace', path: 'externalId', value: 'b' }] },
      }),
      200,
    );
    expect(same.meta.version).toBe('W/"3"');
    const updates = (await auditRows(t, org.id, 'scim.user_updated')).filter((row) => row.metadata.userId === user.id);
    expect(updates.map((row) => row.metadata.changed)).toEqual([['name', 'externalId'], ['externalId']]);
    expect(updates.every((row) => row.actor_id === null && row.metadata.scimTokenId === tokenId)).toBe(true);
  });

  it('userName never changes; unknown attributes and paths are refused; read-only ones too', async () => {
    const user = await create({ userName: uniqueEmail('fixed') });
    const patch = (Operations: unknown[]) =>
      scim(`/Users/${user.id}`, { method: 'PATCH', body: { schemas: [PATCH], Operations } });
    await expectScim(await patch([{ op: 'replace', path: 'userName', value: uniqueEmail('else') }]), 400, 'mutability');
    await expectScim(await patch([{ op: 'replace', path: 'userName', value: user.userName.toUpperCase() }]), 200);
    await expectScim(await patch([{ op: 'replace', path: 'nope', value: 1 }]), 400, 'invalidPath');
    await expectScim(await patch([{ op: 'remove' }]), 400, 'noTarget');
    await expectScim(await patch([{ op: 'replace', path: 'id', value: 'x' }]), 400, 'mutability');
    // What directories map by default and the service does not keep: ignored.
    await expectScim(await patch([{ op: 'add', path: 'title', value: 'Engineer' }]), 200);
  });

  it('lists pages with startIndex, count and totalResults', async () => {
    const fresh = await createOrganization(t, await signedInUser(t));
    const client = scimClient(t, (await mintToken(t, fresh)).token);
    const names = [];
    for (let i = 0; i < 5; i++) {
      const email = uniqueEmail(`page${i}`);
      await expectScim(await client('/Users', { body: { userName: email } }), 201);
      names.push(email);
    }
    const page = async (query: string) => expectScim(await client(`/Users${query}`), 200);
    const all = await page('');
    expect(all).toMatchObject({ schemas: [LIST], totalResults: 5, startIndex: 1, itemsPerPage: 5 });
    expect(all.Resources.map((u: any) => u.userName)).toEqual(names);
    const second = await page('?startIndex=3&count=2');
    expect(second).toMatchObject({ totalResults: 5, startIndex: 3, itemsPerPage: 2 });
    expect(second.Resources.map((u: any) => u.userName)).toEqual(names.slice(2, 4));
    expect(await page('?count=0')).toMatchObject({ totalResults: 5, itemsPerPage: 0, Resources: [] });
    expect(await page('?startIndex=0&count=1')).toMatchObject({ startIndex: 1, itemsPerPage: 1 });
    expect(await page('?startIndex=9')).toMatchObject({ totalResults: 5, itemsPerPage: 0 });
  });

  it('filters with every operator, and/or/not and grouping', async () => {
    const fresh = await createOrganization(t, await signedInUser(t));
    const client = scimClient(t, (await mintToken(t, fresh)).token);
    const tag = crypto.randomUUID().slice(0, 6);
    const made = [];
    for (const [local, ext, active, name] of [
      ['alice', 'EXT-1', true, 'Alice Smith'],
      ['bob', 'ext-2', false, 'Bob Jones'],
      ['carol', null, true, 'Carol Smith'],
    ] as const) {
      const body = { userName: `${local}.${tag}@example.com`, externalId: ext ?? undefined, active, displayName: name };
      made.push(await expectScim(await client('/Users', { body }), 201));
    }
    const [a, b, c] = made;
    const ids = async (filter: string) => {
      const list = await expectScim(await client(`/Users?filter=${encodeURIComponent(filter)}`), 200);
      return list.Resources.map((u: any) => u.id).sort();
    };
    const sorted = (...users: any[]) => users.map((u) => u.id).sort();
    expect(await ids(`userName eq "ALICE.${tag}@example.com"`)).toEqual(sorted(a));
    expect(await ids(`userName ne "alice.${tag}@example.com"`)).toEqual(sorted(b, c));
    expect(await ids('userName co "ICE."')).toEqual(sorted(a));
    expect(await ids('userName sw "B"')).toEqual(sorted(b));
    expect(await ids(`userName ew "${tag.toUpperCase()}@EXAMPLE.COM"`)).toEqual(sorted(a, b, c));
    expect(await ids(`userName gt "bob.${tag}@example.com"`)).toEqual(sorted(c));
    expect(await ids(`userName ge "bob.${tag}@example.com"`)).toEqual(sorted(b, c));
    expect(await ids(`userName lt "bob.${tag}@example.com"`)).toEqual(sorted(a));
    expect(await ids(`userName le "BOB.${tag}@example.com"`)).toEqual(sorted(a, b));
    expect(await ids('externalId eq "EXT-1"')).toEqual(sorted(a));
    expect(await ids('externalId eq "ext-1"')).toEqual([]);
    expect(await ids('externalId pr')).toEqual(sorted(a, b));
    expect(await ids('not (externalId pr)')).toEqual(sorted(c));
    expect(await ids(`emails.value eq "carol.${tag}@example.com"`)).toEqual(sorted(c));
    expect(await ids('emails[type eq "work" and value sw "ALICE"]')).toEqual(sorted(a));
    expect(await ids('active eq false')).toEqual(sorted(b));
    expect(await ids('active ne false')).toEqual(sorted(a, c));
    expect(await ids('displayName co "smith"')).toEqual(sorted(a, c));
    expect(await ids('displayName eq "bob jones" or (active eq true and externalId pr)')).toEqual(sorted(a, b));
    expect(await ids(`meta.lastModified ge "${a.meta.lastModified}"`)).toEqual(sorted(a, b, c));
    expect(await ids(`meta.lastModified gt "${c.meta.lastModified}"`)).toEqual([]);
    expect(await ids(`meta.lastModified le "${a.meta.lastModified}"`)).toEqual(sorted(a));
    expect(await ids(`meta.lastModified lt "${a.meta.lastModified}"`)).toEqual([]);
    await expectScim(await client(`/Users?filter=${encodeURIComponent('password eq "x"')}`), 400, 'invalidFilter');
    await expectScim(await client(`/Users?filter=${encodeURIComponent('userName eq')}`), 400, 'invalidFilter');
  });

  it("another organization's token finds, changes and deletes none of these Users (404)", async () => {
    const user = await create({ userName: uniqueEmail('mine') });
    await expectScim(await otherScim(`/Users/${user.id}`), 404);
    await expectScim(await otherScim(`/Users/${user.id}`, { method: 'PUT', body: { userName: user.userName } }), 404);
    const deactivate = { schemas: [PATCH], Operations: [{ op: 'replace', path: 'active', value: false }] };
    await expectScim(await otherScim(`/Users/${user.id}`, { method: 'PATCH', body: deactivate }), 404);
    await expectScim(await otherScim(`/Users/${user.id}`, { method: 'DELETE' }), 404);
    const list = await expectScim(
      await otherScim(`/Users?filter=${encodeURIComponent(`userName eq "${user.userName}"`)}`),
      200,
    );
    expect(list.totalResults).toBe(0);
    // Its own POST of the address links the account there, and leaves this organization's alone.
    await expectScim(await otherScim('/Users', { body: { userName: user.userName } }), 201);
    expect(await expectScim(await scim(`/Users/${user.id}`), 200)).toMatchObject({ active: true, meta: user.meta });
    await expectScim(await scim('/Users/not-a-uuid'), 404);
  });

  it('DELETE removes the membership and the resource: 204, then 404', async () => {
    const user = await create({ userName: uniqueEmail('gone') });
    await expectScim(await scim(`/Users/${user.id}`, { method: 'DELETE', headers: { 'if-match': 'W/"9"' } }), 412);
    const res = await scim(`/Users/${user.id}`, { method: 'DELETE' });
    expect(res.status).toBe(204);
    await expectScim(await scim(`/Users/${user.id}`), 404);
    await expectScim(await scim(`/Users/${user.id}`, { method: 'DELETE' }), 404);
    expect((await listMembers(t, org.owner)).some((m) => m.userId === user.id)).toBe(false);
    const removed = (await auditRows(t, org.id, 'member.removed')).find((row) => row.metadata.userId === user.id);
    expect(removed).toMatchObject({ actor_id: null, metadata: { reason: 'scim_deleted', scimTokenId: tokenId } });
    // The account stays (it is the person's); a new POST makes the User again.
    await expectScim(await scim('/Users', { body: { userName: user.userName } }), 201);
  });
});
