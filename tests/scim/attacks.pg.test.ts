import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/app.js';
import { call, expectStatus, PASSWORD } from '../support/http.js';
import {
  asOwnerInTenant,
  createOrganization,
  listMembers,
  roleBySlug,
  type TestOrganization,
} from '../support/orgs.js';
import { signedInUser, uniqueEmail } from '../support/users.js';
import { expectScim, mintToken, PATCH, type Scim, scimClient, USER } from './users-client.js';

/**
 * docs/scim.md, from a directory that tries what it should not: accounts it
 * may not take in (a platform role, scheduled for deletion), an address
 * nobody has proven (linked only as its proof), ids and filter values the
 * database cannot hold (each a SCIM 4xx, never a 500), and case folding
 * beyond ASCII in filters.
 */
const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';

describe('SCIM against a directory that overreaches', () => {
  let t: TestApp;
  let org: TestOrganization;
  let scim: Scim;

  beforeAll(async () => {
    t = await createTestApp();
    org = await createOrganization(t, await signedInUser(t));
    scim = scimClient(t, (await mintToken(t, org)).token);
  });
  afterAll(async () => {
    await t?.close();
  });

  const setAccount = (id: string, change: Record<string, unknown>) =>
    t.database.withOwner((owner) => owner.updateTable('users').set(change).where('id', '=', id).execute());
  const scimRow = (userId: string) =>
    asOwnerInTenant(t, org.id, (trx) =>
      trx.selectFrom('scim_users').select('user_id').where('user_id', '=', userId).executeTakeFirst(),
    );
  const isMember = async (userId: string) => (await listMembers(t, org.owner)).some((m) => m.userId === userId);
  /** 409 with no scimType (RFC 7644 section 3.12 has none for it), the same detail whatever the reason. */
  const refused = async (res: Response) => {
    const body = await expectScim(res, 409, undefined);
    expect(body.detail).toBe('This account cannot be provisioned by a directory');
  };

  it('never links an account with a platform role or scheduled for deletion, as single sign-on', async () => {
    for (const change of [{ role: 'admin' }, { role: 'superadmin' }, { deleted_at: new Date() }]) {
      const person = await signedInUser(t);
      await setAccount(person.id, change);
      for (const active of [true, false])
        await refused(
          await scim('/Users', { body: { schemas: [USER], userName: person.email.toUpperCase(), active } }),
        );
      expect(await scimRow(person.id)).toBeUndefined();
      expect(await isMember(person.id)).toBe(false);
    }
  });

  it('links an account whose address nobody has proven only as its proof: the password set before it goes', async () => {
    const email = uniqueEmail('squatter');
    const signUp = await call(t, '/api/auth/sign-up/email', { body: { email, password: PASSWORD, name: 'Squatter' } });
    expect(signUp.status).toBe(200);
    const { id } = await t.database.withOwner((owner) =>
      owner.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow(),
    );
    expect((await expectScim(await scim('/Users', { body: { schemas: [USER], userName: email } }), 201)).id).toBe(id);
    expect(await isMember(id)).toBe(true);
    const account = await t.database.withOwner(async (owner) => ({
      user: await owner.selectFrom('users').select('email_verified').where('id', '=', id).executeTakeFirstOrThrow(),
      credentials: await owner.selectFrom('accounts').select('provider_id').where('user_id', '=', id).execute(),
    }));
    // Vouched for by the directory, as the accounts it creates; with the squatter's password kept,
    // its holder would now sign in to a verified account inside the organization.
    expect(account).toEqual({ user: { email_verified: true }, credentials: [] });
    const attempt = await call(t, '/api/auth/sign-in/email', { body: { email, password: PASSWORD } });
    expect(attempt.status).toBe(401);
  });

  it('does not bring back, nor rename, a User whose account has since taken a platform role', async () => {
    const person = await signedInUser(t);
    const user = await expectScim(await scim('/Users', { body: { schemas: [USER], userName: person.email } }), 201);
    const patch = (Operations: unknown[]) =>
      scim(`/Users/${user.id}`, { method: 'PATCH', body: { schemas: [PATCH], Operations } });
    await expectScim(await patch([{ op: 'replace', path: 'active', value: false }]), 200);
    await setAccount(person.id, { role: 'admin' });
    await refused(await patch([{ op: 'replace', path: 'active', value: 'True' }]));
    await refused(
      await scim(`/Users/${user.id}`, {
        method: 'PUT',
        body: { schemas: [USER], userName: person.email, active: true },
      }),
    );
    expect(await isMember(person.id)).toBe(false);
    const renamed = await expectScim(await patch([{ op: 'replace', path: 'displayName', value: 'Renamed' }]), 200);
    expect(renamed.displayName).toBe(person.name);
  });

  it('a Group id that is no UUID is 404, not a database error', async () => {
    const body = { schemas: [GROUP], displayName: 'Engineering' };
    const patch = { schemas: [PATCH], Operations: [{ op: 'replace', path: 'displayName', value: 'x' }] };
    for (const id of ['nope', '1', `${crypto.randomUUID()}x`, "' or 1=1 --"]) {
      const path = `/Groups/${encodeURIComponent(id)}`;
      await expectScim(await scim(path), 404, undefined);
      await expectScim(await scim(path, { method: 'PUT', body }), 404, undefined);
      await expectScim(await scim(path, { method: 'PATCH', body: patch }), 404, undefined);
      await expectScim(await scim(path, { method: 'DELETE' }), 404, undefined);
    }
  });

  it('a filter date the database cannot hold is invalidFilter, not a database error', async () => {
    for (const value of ['0000-01-01T00:00:00Z', '0001-01-01T00:00:00+01:00', '9999-12-31T23:00:00-05:00'])
      for (const resource of ['Users', 'Groups'])
        await expectScim(
          await scim(`/${resource}?filter=${encodeURIComponent(`meta.lastModified gt "${value}"`)}`),
          400,
          'invalidFilter',
        );
    await expectScim(await scim(`/Users?filter=${encodeURIComponent('meta.created ge "0001-01-01T00:00:00Z"')}`), 200);
  });

  it('filters fold ASCII letters only, as userName is matched: \u00C9 is not \u00E9, KELVIN SIGN is not k', async () => {
    const accented = `\u00e9-${uniqueEmail('accent')}`;
    const kelvin = `k-${uniqueEmail('kelvin')}`;
    for (const userName of [accented, kelvin])
      await expectScim(await scim('/Users', { body: { schemas: [USER], userName } }), 201);
    const total = async (filter: string) =>
      (await expectScim(await scim(`/Users?filter=${encodeURIComponent(filter)}`), 200)).totalResults;
    expect(await total(`userName eq "${accented.toUpperCase()}"`)).toBe(0);
    // ASCII letters in upper case, \u00E9 as it is: the same userName.
    expect(await total(`userName eq "${accented.replace(/[a-z]+/g, (s) => s.toUpperCase())}"`)).toBe(1);
    expect(await total(`emails.value eq "${accented.replace('\u00e9', '\u00c9')}"`)).toBe(0);
    expect(await total(`userName eq "${kelvin.replace('k-', '\u212a-')}"`)).toBe(0);
    expect(await total(`userName eq "${kelvin.toUpperCase()}"`)).toBe(1);
  });

  it('identifiers with control characters are refused (400), where a name has them made spaces', async () => {
    const bad = ['a\u0007b', 'a\u001b[31mb', 'a\u009bb', 'a\u2028b'];
    for (const value of bad) {
      await expectScim(
        await scim('/Users', { body: { schemas: [USER], userName: `x${value}@example.test` } }),
        400,
        'invalidValue',
      );
      await expectScim(
        await scim('/Users', { body: { schemas: [USER], userName: uniqueEmail('ctl'), externalId: value } }),
        400,
        'invalidValue',
      );
      await expectScim(await scim('/Groups', { body: { schemas: [GROUP], displayName: value } }), 400, 'invalidValue');
      await expectScim(
        await scim('/Groups', { body: { schemas: [GROUP], displayName: 'Fine', externalId: value } }),
        400,
        'invalidValue',
      );
    }
    const user = await expectScim(
      await scim('/Users', { body: { schemas: [USER], userName: uniqueEmail('ctl'), displayName: 'Ada\nLovelace' } }),
      201,
    );
    expect(user.displayName).toBe('Ada Lovelace');
    await expectScim(
      await scim(`/Users/${user.id}`, {
        method: 'PATCH',
        body: { schemas: [PATCH], Operations: [{ op: 'replace', path: 'externalId', value: bad[0] }] },
      }),
      400,
      'invalidValue',
    );
  });

  it('no attribute of a User sets a role: roles and groups sent with it change nothing', async () => {
    const group = await expectScim(await scim('/Groups', { body: { schemas: [GROUP], displayName: 'Owners' } }), 201);
    const owner = await roleBySlug(t, org.owner, 'owner');
    await expectStatus(
      await call(t, '/api/scim/group-roles', {
        method: 'PUT',
        body: [{ groupId: group.id, roleId: owner.id }],
        jar: org.owner.jar,
      }),
      200,
    );
    const user = await expectScim(
      await scim('/Users', {
        body: {
          schemas: [USER],
          userName: uniqueEmail('climber'),
          roles: [{ value: 'owner', primary: true }],
          groups: [{ value: group.id }],
          'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User': { manager: { value: org.owner.id } },
        },
      }),
      201,
    );
    expect(user.groups).toEqual([]);
    const roleOf = async () => (await listMembers(t, org.owner)).find((m) => m.userId === user.id)?.roleSlug;
    expect(await roleOf()).toBe('member');
    const patch = (Operations: unknown[]) =>
      scim(`/Users/${user.id}`, { method: 'PATCH', body: { schemas: [PATCH], Operations } });
    await expectScim(await patch([{ op: 'add', path: 'roles', value: [{ value: 'owner' }] }]), 200);
    await expectScim(await patch([{ op: 'add', path: 'groups', value: [{ value: group.id }] }]), 400, 'mutability');
    await expectScim(await patch([{ op: 'add', value: { groups: [{ value: group.id }] } }]), 400, 'mutability');
    expect(await roleOf()).toBe('member');
  });

  it('a PATCH that would visit too many members is 400 tooMany, the group unchanged', async () => {
    const members = [];
    for (let i = 0; i < 101; i++)
      members.push({
        value: (
          await expectScim(await scim('/Users', { body: { schemas: [USER], userName: uniqueEmail('many') } }), 201)
        ).id,
      });
    const group = await expectScim(
      await scim('/Groups', { body: { schemas: [GROUP], displayName: 'Many', members } }),
      201,
    );
    // 1,000 filtered removals on 101 members: past the work one request may do (MAX_PATCH_WORK).
    const Operations = Array.from({ length: 1000 }, (_, i) => ({ op: 'remove', path: `members[value eq "x${i}"]` }));
    await expectScim(
      await scim(`/Groups/${group.id}`, { method: 'PATCH', body: { schemas: [PATCH], Operations } }),
      400,
      'tooMany',
    );
    const after = await expectScim(await scim(`/Groups/${group.id}`), 200);
    expect(after.meta.version).toBe(group.meta.version);
    expect(after.members).toHaveLength(101);
  });

  /**
   * `users` SCIM Users (`<name>-<tag>-<i>@example.test`), each in all of
   * `groups` groups (`<name> <tag> <i>`), written straight to the tables;
   * resolves to the tag.
   */
  async function everyoneInEveryGroup(name: string, users: number, groups: number): Promise<string> {
    const tag = crypto.randomUUID().slice(0, 8);
    await asOwnerInTenant(t, org.id, async (trx) => {
      await sql`insert into users (email, name, email_verified)
        select ${name} || '-' || ${tag} || '-' || i || '@example.test', ${name} || ' ' || i, true
        from generate_series(1, ${users}::int) i`.execute(trx);
      await sql`insert into scim_users (tenant_id, user_id, active)
        select ${org.id}::uuid, id, false from users where email like ${`${name}-${tag}-%`}`.execute(trx);
      await sql`insert into scim_groups (tenant_id, display_name)
        select ${org.id}::uuid, ${name} || ' ' || ${tag} || ' ' || i from generate_series(1, ${groups}::int) i`.execute(
        trx,
      );
      await sql`insert into scim_group_members (tenant_id, group_id, user_id)
        select ${org.id}::uuid, g.id, u.id from scim_groups g, users u
        where g.display_name like ${`${name} ${tag} %`} and u.email like ${`${name}-${tag}-%`}`.execute(trx);
    });
    return tag;
  }

  it('a list of groups holding more than 100,000 members between them is 400 tooMany, not built', async () => {
    // 1,000 Users in 101 groups: 101,000 members.
    const tag = await everyoneInEveryGroup('bulk', 1000, 101);
    const filter = encodeURIComponent(`displayName sw "bulk ${tag}"`);
    const refused = await expectScim(await scim(`/Groups?filter=${filter}&count=200`), 400, 'tooMany');
    expect(refused.detail).toContain('excludedAttributes=members');
    const without = await expectScim(await scim(`/Groups?filter=${filter}&count=200&excludedAttributes=members`), 200);
    expect(without.itemsPerPage).toBe(101);
    const few = await expectScim(await scim(`/Groups?filter=${filter}&count=2`), 200);
    expect(few.Resources.map((g: { members: unknown[] }) => g.members.length)).toEqual([1000, 1000]);
  });

  it('a list of Users in more than 100,000 groups between them is 400 tooMany, not built', async () => {
    // 100 Users in 1,001 groups: 100,100 group references.
    const tag = await everyoneInEveryGroup('joiner', 100, 1001);
    const filter = encodeURIComponent(`userName sw "joiner-${tag}-"`);
    await expectScim(await scim(`/Users?filter=${filter}&count=200`), 400, 'tooMany');
    const few = await expectScim(await scim(`/Users?filter=${filter}&count=2`), 200);
    expect(few.Resources.map((u: { groups: unknown[] }) => u.groups.length)).toEqual([1001, 1001]);
  });

  it('mapping groups whose members outnumber the parameters one statement may carry (65,535) is not a 500', async () => {
    // Seven groups of 10,000 Users each (the most a group holds), written straight to the tables.
    const names: string[] = [];
    for (const i of [1, 2, 3, 4, 5, 6, 7])
      names.push(`crowd${i} ${await everyoneInEveryGroup(`crowd${i}`, 10_000, 1)} 1`);
    const groups = await asOwnerInTenant(t, org.id, (trx) =>
      trx.selectFrom('scim_groups').select('id').where('display_name', 'in', names).execute(),
    );
    expect(groups).toHaveLength(7);
    const member = await roleBySlug(t, org.owner, 'member');
    await expectStatus(
      await call(t, '/api/scim/group-roles', {
        method: 'PUT',
        body: groups.map((group) => ({ groupId: group.id, roleId: member.id })),
        jar: org.owner.jar,
      }),
      200,
    );
  });
});
