import { describe, expect, it } from 'vitest';
import { ScimError } from '../../src/scim/errors.js';
import { parseScimFilter, type ScimFilter } from '../../src/scim/filter.js';
import { GROUP_FILTER_ATTRIBUTES, USER_FILTER_ATTRIBUTES } from '../../src/scim/filter-attributes.js';
import { matchesScimFilter } from '../../src/scim/filter-match.js';

/**
 * RFC 7644 section 3.4.2.2 filters: parseScimFilter's validated AST and
 * matchesScimFilter, the oracle the database query must agree with, over
 * three Users.
 */
const user = (id: string, userName: string, extra: Record<string, unknown> = {}) => ({
  schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
  id,
  userName,
  displayName: `Name ${id}`,
  emails: [{ value: userName, type: 'work', primary: true }],
  active: true,
  meta: { resourceType: 'User', created: '2026-01-01T00:00:00.000Z', lastModified: '2026-02-01T00:00:00.000Z' },
  ...extra,
});
const USERS = [
  user('u1', 'Alice@Example.com', { externalId: 'EXT-1' }),
  user('u2', 'bob@example.org', {
    active: false,
    externalId: 'ext-2',
    meta: { created: '2026-03-01T10:00:00Z', lastModified: '2026-03-05T10:00:00+02:00' },
  }),
  user('u3', 'carol@sub.example.com', { displayName: '', emails: [{ value: 'carol@home.net', type: 'home' }] }),
];

const users = (filter: string) =>
  USERS.filter((resource) => matchesScimFilter(parseScimFilter(filter, USER_FILTER_ATTRIBUTES), resource)).map(
    (resource) => resource.id,
  );

const refused = (filter: string, attributes = USER_FILTER_ATTRIBUTES) => {
  try {
    parseScimFilter(filter, attributes);
  } catch (error) {
    expect(error).toBeInstanceOf(ScimError);
    expect((error as ScimError).status).toBe(400);
    expect((error as ScimError).scimType).toBe('invalidFilter');
    return (error as ScimError).detail;
  }
  throw new Error(`accepted: ${filter}`);
};

describe('parseScimFilter + matchesScimFilter: operators', () => {
  it.each([
    ['userName eq "alice@example.com"', ['u1']],
    ['userName ne "alice@example.com"', ['u2', 'u3']],
    ['userName co "EXAMPLE"', ['u1', 'u2', 'u3']],
    ['userName sw "B"', ['u2']],
    ['userName ew ".COM"', ['u1', 'u3']],
    ['userName gt "bob@example.org"', ['u3']],
    ['userName ge "bob@example.org"', ['u2', 'u3']],
    ['userName lt "bob@example.org"', ['u1']],
    ['userName le "BOB@example.org"', ['u1', 'u2']],
    ['externalId pr', ['u1', 'u2']],
    ['displayName pr', ['u1', 'u2']],
    ['active eq true', ['u1', 'u3']],
    ['active ne true', ['u2']],
    ['active eq false', ['u2']],
    ['externalId eq null', ['u3']],
    ['externalId ne null', ['u1', 'u2']],
    ['meta.lastModified gt "2026-02-01T00:00:00Z"', ['u2']],
    ['meta.lastModified ge "2026-02-01T00:00:00Z"', ['u1', 'u2', 'u3']],
    ['meta.lastModified lt "2026-03-05T08:00:00Z"', ['u1', 'u3']],
    ['meta.lastModified le "2026-03-05T08:00:00Z"', ['u1', 'u2', 'u3']],
    ['meta.lastModified eq "2026-03-05T08:00:00.000Z"', ['u2']],
    ['meta.created gt "2026-02-01T00:00:00"', ['u2']],
    ['meta.created ne "2026-01-01T00:00:00Z"', ['u2']],
  ])('%s', (filter, expected) => {
    expect(users(filter)).toEqual(expected);
  });

  it('compares caseExact attributes exactly and the others case-insensitively', () => {
    expect(users('externalId eq "ext-1"')).toEqual([]);
    expect(users('externalId eq "EXT-1"')).toEqual(['u1']);
    expect(users('externalId co "xt"')).toEqual(['u2']);
    expect(users('userName eq "ALICE@EXAMPLE.COM"')).toEqual(['u1']);
    expect(users('id eq "U1"')).toEqual([]);
  });

  it('reads attribute names and operators in any case, with or without the core schema URN', () => {
    expect(users('USERNAME EQ "bob@example.org"')).toEqual(['u2']);
    expect(users('urn:ietf:params:scim:schemas:core:2.0:User:userName Eq "bob@example.org"')).toEqual(['u2']);
    expect(users('Emails.Value CO "home" OR Active Eq false')).toEqual(['u2', 'u3']);
  });

  it('filters on a multi-valued attribute by any of its values, and on its value when named alone', () => {
    expect(users('emails.value eq "carol@home.net"')).toEqual(['u3']);
    expect(users('emails co "home.net"')).toEqual(['u3']);
    expect(users('emails.type eq "work"')).toEqual(['u1', 'u2']);
  });

  it('filters on one value of a multi-valued attribute with a value filter', () => {
    expect(users('emails[type eq "work" and value co "example.org"]')).toEqual(['u2']);
    expect(users('emails[type eq "home" and value co "example"]')).toEqual([]);
    expect(users('emails[type eq "work" or value ew ".net"]')).toEqual(['u1', 'u2', 'u3']);
    expect(users('emails[not (type eq "work")] and userName sw "c"')).toEqual(['u3']);
    expect(parseScimFilter('emails[type eq "work"]', USER_FILTER_ATTRIBUTES)).toEqual({
      op: 'valuePath',
      path: 'emails',
      filter: { op: 'eq', path: 'emails.type', attribute: USER_FILTER_ATTRIBUTES['emails.type'], value: 'work' },
    });
  });
});

describe('parseScimFilter: logic, precedence and grouping', () => {
  const shape = (filter: ScimFilter): unknown => {
    switch (filter.op) {
      case 'and':
      case 'or':
        return [shape(filter.left), filter.op, shape(filter.right)];
      case 'not':
        return ['not', shape(filter.filter)];
      case 'valuePath':
        return [filter.path, shape(filter.filter)];
      default:
        return filter.path;
    }
  };
  const parsed = (filter: string) => shape(parseScimFilter(filter, USER_FILTER_ATTRIBUTES));

  it('binds and tighter than or, left to right', () => {
    expect(parsed('id pr or userName pr and active pr')).toEqual(['id', 'or', ['username', 'and', 'active']]);
    expect(parsed('id pr and userName pr or active pr')).toEqual([['id', 'and', 'username'], 'or', 'active']);
    expect(parsed('id pr and userName pr and active pr')).toEqual([['id', 'and', 'username'], 'and', 'active']);
    expect(parsed('id pr or userName pr and active pr or externalId pr')).toEqual([
      ['id', 'or', ['username', 'and', 'active']],
      'or',
      'externalid',
    ]);
  });

  it('groups with parentheses, and not applies to the group that follows it', () => {
    expect(parsed('(id pr or userName pr) and active pr')).toEqual([['id', 'or', 'username'], 'and', 'active']);
    expect(parsed('not (id pr or userName pr) and active pr')).toEqual([
      ['not', ['id', 'or', 'username']],
      'and',
      'active',
    ]);
    expect(parsed('active pr and not (externalId pr)')).toEqual(['active', 'and', ['not', 'externalid']]);
  });

  it('evaluates the same way', () => {
    expect(users('userName sw "a" or userName sw "b" and active eq true')).toEqual(['u1']);
    expect(users('(userName sw "a" or userName sw "b") and active eq true')).toEqual(['u1']);
    expect(users('(userName sw "a" or userName sw "b") and active eq false')).toEqual(['u2']);
    expect(users('userName sw "b" or userName sw "c" and active eq false')).toEqual(['u2']);
    expect(users('not (active eq true) or userName sw "c"')).toEqual(['u2', 'u3']);
    expect(users('not (userName sw "a" or userName sw "b")')).toEqual(['u3']);
    expect(users('not (externalId pr)')).toEqual(['u3']);
  });
});

describe('parseScimFilter: what it refuses (400 invalidFilter)', () => {
  it('names an unknown attribute', () => {
    expect(refused('title eq "x"')).toContain('"title"');
    expect(refused('urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq "x"')).toContain(
      'department',
    );
    expect(refused('phoneNumbers[type eq "work"]')).toContain('phoneNumbers');
    expect(refused('emails[title eq "x"]')).toContain('"title"');
    expect(refused('userName eq "x"', GROUP_FILTER_ATTRIBUTES)).toContain('"userName"');
  });

  it.each([
    ['active co "t"'],
    ['active gt true'],
    ['active sw "t"'],
    ['meta.lastModified co "2026"'],
    ['meta.lastModified ew "Z"'],
    ['userName co null'],
    ['userName gt null'],
  ])('an operator the attribute type does not take: %s', (filter) => {
    expect(refused(filter)).toMatch(/does not apply/);
  });

  it.each([
    ['active eq "true"', 'true or false'],
    ['active eq "False"', 'true or false'],
    ['userName eq true', 'quoted string'],
    ['userName eq 5', 'not a number'],
    ['meta.created gt 5', 'not a number'],
    ['meta.created gt true', 'quoted date'],
    ['meta.created gt "yesterday"', 'ISO 8601'],
    ['meta.created gt "2026-02-30T00:00:00Z"', 'ISO 8601'],
    ['meta.created gt "2026-01-01"', 'ISO 8601'],
  ])('a value of the wrong type: %s', (filter, detail) => {
    expect(refused(filter)).toContain(detail);
  });

  it.each([
    [''],
    ['userName'],
    ['userName eq'],
    ['userName eq alice'],
    ['userName eq "x" and'],
    ['(userName eq "x"'],
    ['userName eq "x")'],
    ['userName xx "x"'],
    ['userName eq "x" userName eq "y"'],
    ['emails[type eq "work"'],
    ['active eq True'],
    ['userName eq "unterminated'],
  ])('a syntax error: %s', (filter) => {
    expect(refused(filter)).toMatch(/filter/i);
  });

  it('guards its input: length, control characters, escapes and forms the parser misreads', () => {
    expect(() => parseScimFilter(`userName eq "${'a'.repeat(1024 - 14)}"`, USER_FILTER_ATTRIBUTES)).not.toThrow();
    expect(refused(`userName eq "${'a'.repeat(1024 - 13)}"`)).toContain('1024');
    expect(refused('userName eq "a\tb"')).toContain('control');
    expect(refused('userName eq\n"a"')).toContain('control');
    expect(refused('userName eq "a\u0085"')).toContain('control');
    // Unguarded, the parser would backtrack on these for minutes.
    expect(refused(`userName eq "${'\n'.repeat(40)}`)).toContain('control');
    expect(refused('userName eq "a\\\\b"')).toContain('escape');
    expect(refused('userName eq "\\u0041"')).toContain('escape');
    expect(refused('emails[type eq "work"].value eq "x"')).toContain('PATCH path');
    expect(refused('emails[type eq "work" and emails[value pr]]')).toContain('another value filter');
  });

  it('reads an escaped quote and brackets inside strings as text', () => {
    const filter = parseScimFilter('displayName eq "say \\"hi\\" ]. [x]"', USER_FILTER_ATTRIBUTES);
    expect(filter).toMatchObject({ op: 'eq', value: 'say "hi" ]. [x]' });
    expect(matchesScimFilter(filter, { displayName: 'SAY "HI" ]. [X]' })).toBe(true);
  });
});

describe('Group filters', () => {
  const groups = [
    { id: 'g1', displayName: 'Engineering', members: [{ value: 'u1' }, { value: 'u2' }] },
    { id: 'g2', displayName: 'Sales', externalId: 'S', members: [] },
  ];
  const match = (filter: string) =>
    groups
      .filter((group) => matchesScimFilter(parseScimFilter(filter, GROUP_FILTER_ATTRIBUTES), group))
      .map((group) => group.id);

  it('filters on displayName, externalId and members', () => {
    expect(match('displayName eq "engineering"')).toEqual(['g1']);
    expect(match('members.value eq "u2"')).toEqual(['g1']);
    expect(match('members[value eq "u2"]')).toEqual(['g1']);
    expect(match('members.value eq "U2"')).toEqual([]);
    expect(match('members pr')).toEqual(['g1']);
    expect(match('externalId eq "S" and not (members pr)')).toEqual(['g2']);
  });
});
