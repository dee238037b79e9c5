import { describe, expect, it } from 'vitest';
import { ScimError } from '../../src/scim/errors.js';
import {
  applyScimPatch,
  MAX_PATCH_WORK,
  PATCH_OP_URN,
  parseScimPatch,
  type ScimResource,
} from '../../src/scim/patch.js';

/**
 * RFC 7644 section 3.5.2 PATCH on a User's and a Group's JSON, including the
 * bodies Microsoft Entra ID's and Okta's provisioning clients send (their
 * capitalised ops, string booleans, path-less value objects with dotted and
 * filtered keys, member lists); each ends in the whole resource expected.
 */
const USER_URN = 'urn:ietf:params:scim:schemas:core:2.0:User';
const GROUP_URN = 'urn:ietf:params:scim:schemas:core:2.0:Group';
const META = { resourceType: 'User', created: '2026-01-01T00:00:00.000Z', version: 'W/"3"' };

const ADA = {
  schemas: [USER_URN],
  id: 'u1',
  externalId: 'ext-1',
  userName: 'ada@example.com',
  name: { formatted: 'Ada Lovelace', givenName: 'Ada', familyName: 'Lovelace' },
  displayName: 'Ada Lovelace',
  emails: [{ value: 'ada@example.com', type: 'work', primary: true }],
  active: true,
  groups: [{ value: 'g1', display: 'Engineering' }],
  meta: META,
};
const ENGINEERING = {
  schemas: [GROUP_URN],
  id: 'g1',
  displayName: 'Engineering',
  members: [
    { value: 'u1', display: 'ada@example.com' },
    { value: 'u2', display: 'bob@example.com' },
  ],
  meta: { ...META, resourceType: 'Group' },
};

const body = (...Operations: unknown[]) => ({ schemas: [PATCH_OP_URN], Operations });
const patchUser = (...operations: unknown[]) => applyScimPatch(ADA, parseScimPatch(body(...operations), 'User'));
const patchGroup = (...operations: unknown[]) =>
  applyScimPatch(ENGINEERING, parseScimPatch(body(...operations), 'Group'));

const refusal = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ScimError);
    const { status, scimType, detail } = error as ScimError;
    return { status, scimType, detail };
  }
  throw new Error('accepted');
};
const userRefusal = (...operations: unknown[]) => refusal(() => patchUser(...operations));
const groupRefusal = (...operations: unknown[]) => refusal(() => patchGroup(...operations));

describe('Microsoft Entra ID', () => {
  it('disables a user with "Replace" and the string "False", with or without a path', () => {
    expect(patchUser({ op: 'Replace', path: 'active', value: 'False' })).toEqual({ ...ADA, active: false });
    expect(patchUser({ op: 'Replace', value: { active: 'False' } })).toEqual({ ...ADA, active: false });
    expect(patchUser({ op: 'replace', path: 'active', value: false })).toEqual({ ...ADA, active: false });
    const disabled = { ...ADA, active: false };
    expect(
      applyScimPatch(disabled, parseScimPatch(body({ op: 'Replace', path: 'active', value: 'True' }), 'User')),
    ).toEqual(ADA);
  });

  it('updates the work email and the family name by path', () => {
    expect(
      patchUser(
        { op: 'Replace', path: 'emails[type eq "work"].value', value: 'ada.byron@example.com' },
        { op: 'Replace', path: 'name.familyName', value: 'Byron' },
      ),
    ).toEqual({
      ...ADA,
      name: { formatted: 'Ada Lovelace', givenName: 'Ada', familyName: 'Byron' },
      emails: [{ value: 'ada.byron@example.com', type: 'work', primary: true }],
    });
  });

  it('replaces several attributes in one value object with dotted, filtered and URN keys', () => {
    expect(
      patchUser({
        op: 'replace',
        value: {
          displayName: 'Augusta King',
          'name.givenName': 'Augusta',
          'name.familyName': 'King',
          'emails[type eq "work"].value': 'augusta@example.com',
          externalId: 'ext-9',
          'urn:ietf:params:scim:schemas:core:2.0:User:userName': 'augusta@example.com',
        },
      }),
    ).toEqual({
      ...ADA,
      displayName: 'Augusta King',
      name: { formatted: 'Ada Lovelace', givenName: 'Augusta', familyName: 'King' },
      emails: [{ value: 'augusta@example.com', type: 'work', primary: true }],
      externalId: 'ext-9',
      userName: 'augusta@example.com',
    });
  });

  it('"Add" on emails[type eq "work"].value with no work email creates it', () => {
    const { emails: _, ...noEmail } = ADA;
    const operations = parseScimPatch(
      body(
        { op: 'Add', path: 'emails[type eq "work"].value', value: 'ada@example.com' },
        { op: 'Add', path: 'externalId', value: 'ext-2' },
      ),
      'User',
    );
    expect(applyScimPatch(noEmail, operations)).toEqual({
      ...noEmail,
      externalId: 'ext-2',
      emails: [{ type: 'work', value: 'ada@example.com' }],
    });
    // When it exists, Add sets its value.
    expect(applyScimPatch(ADA, operations)).toEqual({ ...ADA, externalId: 'ext-2' });
  });

  it('adds and removes group members by value list (with $ref null), and removes one by filter', () => {
    expect(patchGroup({ op: 'Add', path: 'members', value: [{ $ref: null, value: 'u3' }] })).toEqual({
      ...ENGINEERING,
      members: [...ENGINEERING.members, { value: 'u3' }],
    });
    expect(patchGroup({ op: 'Remove', path: 'members', value: [{ $ref: null, value: 'u1' }] })).toEqual({
      ...ENGINEERING,
      members: [{ value: 'u2', display: 'bob@example.com' }],
    });
    expect(patchGroup({ op: 'remove', path: 'members[value eq "u2"]' })).toEqual({
      ...ENGINEERING,
      members: [{ value: 'u1', display: 'ada@example.com' }],
    });
  });

  it('drops what its default User mappings send that the service does not keep, and applies the rest', () => {
    const enterprise = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';
    expect(
      patchUser(
        { op: 'Add', path: 'title', value: 'Countess' },
        { op: 'Replace', path: 'phoneNumbers[type eq "work"].value', value: '+44 20 0000 0000' },
        { op: 'Add', path: `${enterprise}:employeeNumber`, value: '42' },
        { op: 'Replace', path: `${enterprise}:manager`, value: { value: 'u9' } },
        {
          op: 'replace',
          value: { preferredLanguage: 'en-GB', 'addresses[type eq "work"].locality': 'London', displayName: 'Ada L.' },
        },
        { op: 'Remove', path: 'title' },
      ),
    ).toEqual({ ...ADA, displayName: 'Ada L.' });
  });

  it('renames a group', () => {
    expect(patchGroup({ op: 'Replace', path: 'displayName', value: 'Platform' })).toEqual({
      ...ENGINEERING,
      displayName: 'Platform',
    });
  });
});

describe('Okta', () => {
  it('deactivates and reactivates with a value object', () => {
    const deactivated = patchUser({ op: 'replace', value: { active: false } });
    expect(deactivated).toEqual({ ...ADA, active: false });
    expect(
      applyScimPatch(deactivated, parseScimPatch(body({ op: 'replace', value: { active: true } }), 'User')),
    ).toEqual(ADA);
  });

  it('renames a group with its id in the value (the same id is no change)', () => {
    expect(patchGroup({ op: 'replace', value: { id: 'g1', displayName: 'Test SCIMv2' } })).toEqual({
      ...ENGINEERING,
      displayName: 'Test SCIMv2',
    });
  });

  it('removes a member by filter and adds one in the same request', () => {
    expect(
      patchGroup(
        { op: 'remove', path: 'members[value eq "u1"]' },
        { op: 'add', path: 'members', value: [{ value: 'u3', display: 'carol@example.com' }] },
      ),
    ).toEqual({
      ...ENGINEERING,
      members: [
        { value: 'u2', display: 'bob@example.com' },
        { value: 'u3', display: 'carol@example.com' },
      ],
    });
  });

  it('replaces the whole member list', () => {
    expect(patchGroup({ op: 'replace', path: 'members', value: [{ value: 'u9' }, { value: 'u9' }] })).toEqual({
      ...ENGINEERING,
      members: [{ value: 'u9' }],
    });
  });
});

describe('RFC 7644 section 3.5.2 forms', () => {
  it('add: sets a single attribute, merges a complex one, appends to a multi-valued one once', () => {
    expect(patchUser({ op: 'add', value: { name: { middleName: 'King' }, displayName: 'A. L.' } })).toEqual({
      ...ADA,
      name: { ...ADA.name, middleName: 'King' },
      displayName: 'A. L.',
    });
    // A member already there is merged, not repeated; the ids are compared exactly.
    expect(
      patchGroup({ op: 'add', path: 'members', value: [{ value: 'u1', display: 'Ada' }, { value: 'U1' }] }),
    ).toEqual({
      ...ENGINEERING,
      members: [{ value: 'u1', display: 'Ada' }, ENGINEERING.members[1], { value: 'U1' }],
    });
    // Emails compare case-insensitively.
    expect(patchUser({ op: 'add', path: 'emails', value: [{ value: 'ADA@example.com', display: 'Ada' }] })).toEqual({
      ...ADA,
      emails: [{ value: 'ADA@example.com', type: 'work', primary: true, display: 'Ada' }],
    });
  });

  it('a new primary value makes the others not primary', () => {
    expect(
      patchUser({ op: 'add', path: 'emails', value: { value: 'a@home.net', type: 'home', primary: 'true' } }),
    ).toEqual({
      ...ADA,
      emails: [
        { value: 'ada@example.com', type: 'work', primary: false },
        { value: 'a@home.net', type: 'home', primary: true },
      ],
    });
  });

  it('replace: a complex attribute keeps the sub-attributes it is not given; null unassigns', () => {
    expect(patchUser({ op: 'replace', path: 'name', value: { givenName: 'Augusta', formatted: null } })).toEqual({
      ...ADA,
      name: { givenName: 'Augusta', familyName: 'Lovelace' },
    });
    const { externalId: _, ...noExternalId } = ADA;
    expect(patchUser({ op: 'replace', path: 'externalId', value: null })).toEqual(noExternalId);
    expect(patchUser({ op: 'replace', path: 'emails[type eq "work"]', value: { display: 'Work' } })).toEqual({
      ...ADA,
      emails: [{ ...ADA.emails[0], display: 'Work' }],
    });
  });

  it('remove: a single attribute, a sub-attribute, a whole multi-valued attribute, a missing one', () => {
    const { externalId: _, ...noExternalId } = ADA;
    expect(patchUser({ op: 'remove', path: 'externalId' })).toEqual(noExternalId);
    expect(patchUser({ op: 'remove', path: 'name.givenName' })).toEqual({
      ...ADA,
      name: { formatted: 'Ada Lovelace', familyName: 'Lovelace' },
    });
    const { members: __, ...noMembers } = ENGINEERING;
    expect(patchGroup({ op: 'remove', path: 'members' })).toEqual(noMembers);
    expect(patchGroup({ op: 'remove', path: 'members[value eq "u1" or value eq "u2"]' })).toEqual(noMembers);
    expect(applyScimPatch(noExternalId, parseScimPatch(body({ op: 'remove', path: 'externalId' }), 'User'))).toEqual(
      noExternalId,
    );
  });

  it('a remove whose filter matches nothing changes nothing (a retried removal succeeds)', () => {
    expect(patchGroup({ op: 'remove', path: 'members[value eq "gone"]' })).toEqual(ENGINEERING);
    expect(patchGroup({ op: 'Remove', path: 'members', value: [{ value: 'gone' }] })).toEqual(ENGINEERING);
  });

  it('reads names in any case and the core schema URN, and answers canonical names', () => {
    expect(
      patchUser(
        { op: 'REPLACE', path: 'NAME.GIVENNAME', value: 'Augusta' },
        { op: 'Replace', path: `${USER_URN}:Active`, value: false },
        { op: 'add', value: { [USER_URN]: { DisplayName: 'AK' } } },
      ),
    ).toEqual({ ...ADA, name: { ...ADA.name, givenName: 'Augusta' }, active: false, displayName: 'AK' });
    expect(
      parseScimPatch({ schemas: [PATCH_OP_URN], operations: [{ op: 'remove', path: 'externalId' }] }, 'Group'),
    ).toHaveLength(1);
  });

  it('never changes its input, and applies all operations or none', () => {
    const before = structuredClone(ADA);
    expect(
      userRefusal({ op: 'replace', path: 'displayName', value: 'X' }, { op: 'replace', path: 'id', value: 'u2' })
        .scimType,
    ).toBe('mutability');
    patchUser({ op: 'replace', path: 'name.givenName', value: 'X' }, { op: 'remove', path: 'emails' });
    expect(ADA).toEqual(before);
  });
});

describe('work', () => {
  const big = {
    ...ENGINEERING,
    members: Array.from({ length: 10_000 }, (_, i) => ({ value: `u${i}`, display: `user${i}@example.com` })),
  };
  const apply = (...operations: unknown[]) => applyScimPatch(big, parseScimPatch(body(...operations), 'Group'));

  it('a request whose operations would visit too many values is tooMany, refused before the work', () => {
    const removals = Array.from({ length: 1000 }, (_, i) => ({ op: 'remove', path: `members[value eq "x${i}"]` }));
    const started = performance.now();
    expect(refusal(() => apply(...removals))).toMatchObject({ status: 400, scimType: 'tooMany' });
    // Unbounded, this request held the core for seconds.
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('what directories send fits: a few removals by filter, a member list, a whole replacement', () => {
    const removed = apply(
      { op: 'remove', path: 'members[value eq "u1"]' },
      { op: 'remove', path: 'members[value eq "u2"]' },
      { op: 'add', path: 'members', value: [{ value: 'new' }] },
    );
    expect((removed.members as unknown[]).length).toBe(9_999);
    const replaced = apply({ op: 'replace', path: 'members', value: big.members.slice(0, 5_000) });
    expect((replaced.members as unknown[]).length).toBe(5_000);
    expect(MAX_PATCH_WORK).toBeGreaterThanOrEqual(3 * big.members.length);
  });
});

describe('refusals', () => {
  it.each([
    ['a body that is not an object', () => parseScimPatch([], 'User')],
    ['no schemas', () => parseScimPatch({ Operations: [{ op: 'remove', path: 'externalId' }] }, 'User')],
    ['another schema', () => parseScimPatch({ schemas: [USER_URN], Operations: [] }, 'User')],
    ['no Operations', () => parseScimPatch({ schemas: [PATCH_OP_URN] }, 'User')],
    ['empty Operations', () => parseScimPatch(body(), 'User')],
    ['an operation that is not an object', () => parseScimPatch(body('remove'), 'User')],
    ['no op', () => parseScimPatch(body({ path: 'externalId' }), 'User')],
    ['an unknown op', () => parseScimPatch(body({ op: 'move', path: 'externalId' }), 'User')],
    ['a path that is not a string', () => parseScimPatch(body({ op: 'remove', path: 5 }), 'User')],
    ['add without a value', () => parseScimPatch(body({ op: 'add', path: 'externalId' }), 'User')],
    ['no path and no object', () => parseScimPatch(body({ op: 'replace', value: 'x' }), 'User')],
    [
      'too many operations',
      () => parseScimPatch(body(...Array.from({ length: 1001 }, () => ({ op: 'remove', path: 'externalId' }))), 'User'),
    ],
  ])('invalidSyntax: %s', (_, run) => {
    expect(refusal(run)).toMatchObject({ status: 400, scimType: 'invalidSyntax' });
  });

  it.each([
    [{ op: 'replace', path: 'name.nickName', value: 'x' }, 'nickName'],
    [{ op: 'replace', path: 'userName.first', value: 'x' }, 'first'],
    [{ op: 'replace', path: 'urn:example:params:scim:schemas:custom:2.0:User:department', value: 'x' }, 'schema'],
    [{ op: 'replace', path: 'name[givenName eq "x"]', value: {} }, 'not multi-valued'],
    [{ op: 'replace', path: 'emails[type eq "work"', value: 'x' }, 'unclosed'],
    [{ op: 'replace', path: 'emails[type eq "work"]value', value: 'x' }, 'unexpected'],
    [{ op: 'replace', path: 'emails..value', value: 'x' }, 'not an attribute path'],
    [{ op: 'add', path: 'members', value: [{ value: 'u1' }] }, 'members'],
    [{ op: 'replace', value: { favoriteColor: 'x' } }, 'favoriteColor'],
    [{ op: 'replace', path: 'favoriteColor', value: 'x' }, 'favoriteColor'],
    [{ op: 'add', path: 'emails', value: [{ value: 'x', kind: 'work' }] }, 'kind'],
  ])('invalidPath: %j', (operation, named) => {
    const { scimType, detail } = userRefusal(operation);
    expect(scimType).toBe('invalidPath');
    expect(detail).toContain(named);
  });

  it('invalidFilter: a value filter the filter grammar refuses', () => {
    expect(userRefusal({ op: 'remove', path: 'emails[type xx "work"]' }).scimType).toBe('invalidFilter');
    expect(userRefusal({ op: 'remove', path: 'emails[kind eq "work"]' }).detail).toContain('kind');
  });

  it('noTarget: remove without a path, replace or add on a filter that matches nothing', () => {
    expect(userRefusal({ op: 'remove' })).toMatchObject({ status: 400, scimType: 'noTarget' });
    expect(userRefusal({ op: 'Remove', value: { externalId: 'ext-1' } }).scimType).toBe('noTarget');
    expect(userRefusal({ op: 'replace', path: 'emails[type eq "home"].value', value: 'x' }).scimType).toBe('noTarget');
    expect(groupRefusal({ op: 'replace', path: 'members[value eq "u9"].display', value: 'x' }).scimType).toBe(
      'noTarget',
    );
    expect(userRefusal({ op: 'add', path: 'emails[value co "home"].type', value: 'home' }).scimType).toBe('noTarget');
  });

  it.each([
    [{ op: 'replace', path: 'id', value: 'u2' }],
    [{ op: 'remove', path: 'id' }],
    [{ op: 'replace', value: { id: 'u2', active: false } }],
    [{ op: 'replace', path: 'meta.created', value: '2020-01-01T00:00:00Z' }],
    [{ op: 'add', path: 'groups', value: [{ value: 'g2' }] }],
    [{ op: 'remove', path: 'groups' }],
    [{ op: 'remove', path: 'groups[value eq "g1"]' }],
    [{ op: 'replace', path: 'schemas', value: [GROUP_URN] }],
  ])('mutability: %j', (operation) => {
    expect(userRefusal(operation)).toMatchObject({ status: 400, scimType: 'mutability' });
  });

  it.each([
    [{ op: 'replace', path: 'active', value: 'yes' }, 'true or false'],
    [{ op: 'replace', path: 'active', value: 1 }, 'true or false'],
    [{ op: 'replace', path: 'userName', value: 5 }, 'a string'],
    [{ op: 'replace', path: 'name', value: 'Ada' }, 'an object'],
    [{ op: 'add', path: 'emails', value: ['ada@example.com'] }, 'an object'],
    [{ op: 'replace', path: 'emails[type eq "work"].primary', value: 'no' }, 'true or false'],
    [{ op: 'add', path: 'emails', value: [{ type: 'home' }] }, 'has a value'],
    [{ op: 'replace', value: { emails: [{ value: '', type: 'home' }] } }, 'has a value'],
    [{ op: 'remove', path: 'userName' }, 'required'],
    [{ op: 'replace', path: 'userName', value: '' }, 'required'],
    [{ op: 'replace', value: { userName: null } }, 'required'],
  ])('invalidValue: %j', (operation, detail) => {
    const refused = userRefusal(operation);
    expect(refused).toMatchObject({ status: 400, scimType: 'invalidValue' });
    expect(refused.detail).toContain(detail);
  });

  it('a Group keeps its displayName, and each member has a value', () => {
    expect(groupRefusal({ op: 'remove', path: 'displayName' }).scimType).toBe('invalidValue');
    expect(groupRefusal({ op: 'Add', path: 'members', value: [{ $ref: null, value: null }] }).scimType).toBe(
      'invalidValue',
    );
    expect(groupRefusal({ op: 'Remove', path: 'members', value: [{ display: 'Ada' }] }).scimType).toBe('invalidValue');
  });
});

it('keeps a resource as JSON', () => {
  const resource: ScimResource = JSON.parse(JSON.stringify(ADA));
  expect(JSON.parse(JSON.stringify(applyScimPatch(resource, [])))).toEqual(ADA);
});
