import { badRequest } from './errors.js';
import { parseScimFilter, type ScimAttributeMap, type ScimFilter } from './filter.js';

/**
 * The attributes a PATCH may name (RFC 7643 sections 4.1 and 4.2, as far as
 * the service keeps them), and PATCH paths (RFC 7644 section 3.5.2):
 * `attr`, `attr.sub`, `attr[filter]`, `attr[filter].sub`, each optionally
 * prefixed by the resource's core schema URN; names case-insensitive.
 */

export interface ScimPatchAttribute {
  /** Canonical spelling, as the resource JSON holds it. */
  name: string;
  type: 'string' | 'boolean' | 'complex';
  multiValued?: boolean;
  /** RFC 7643 mutability readOnly: a change is 400 mutability. */
  readOnly?: boolean;
  /** Never removed or emptied (400 invalidValue); a sub-attribute: in every value of a list sent. */
  required?: boolean;
  caseExact?: boolean;
  subAttributes?: readonly ScimPatchAttribute[];
}

export type ScimPatchSchema = 'User' | 'Group';

const text = (name: string, extra: Partial<ScimPatchAttribute> = {}): ScimPatchAttribute => ({
  name,
  type: 'string',
  ...extra,
});
const META: ScimPatchAttribute = {
  name: 'meta',
  type: 'complex',
  readOnly: true,
  subAttributes: ['resourceType', 'created', 'lastModified', 'location', 'version'].map((name) => text(name)),
};
const COMMON = [
  text('id', { readOnly: true, caseExact: true }),
  text('schemas', { readOnly: true, multiValued: true, caseExact: true }),
  text('externalId', { caseExact: true }),
  META,
];
/** A reference to another resource: `members` of a Group, `groups` of a User. */
const reference = (name: string, readOnly: boolean): ScimPatchAttribute => ({
  name,
  type: 'complex',
  multiValued: true,
  readOnly,
  subAttributes: [
    text('value', { caseExact: true, required: true }),
    text('display'),
    text('$ref', { caseExact: true }),
    text('type'),
  ],
});

export const PATCH_SCHEMAS: Record<ScimPatchSchema, { urn: string; attributes: readonly ScimPatchAttribute[] }> = {
  User: {
    urn: 'urn:ietf:params:scim:schemas:core:2.0:User',
    attributes: [
      ...COMMON,
      text('userName', { required: true }),
      {
        name: 'name',
        type: 'complex',
        subAttributes: ['formatted', 'familyName', 'givenName', 'middleName', 'honorificPrefix', 'honorificSuffix'].map(
          (name) => text(name),
        ),
      },
      text('displayName'),
      { name: 'active', type: 'boolean' },
      {
        name: 'emails',
        type: 'complex',
        multiValued: true,
        subAttributes: [
          text('value', { required: true }),
          text('display'),
          text('type'),
          { name: 'primary', type: 'boolean' },
        ],
      },
      reference('groups', true),
    ],
  },
  Group: {
    urn: 'urn:ietf:params:scim:schemas:core:2.0:Group',
    attributes: [...COMMON, text('displayName', { required: true }), reference('members', false)],
  },
};

/**
 * What a directory maps by default that the service does not keep (Entra
 * ID's default User mappings include title, phone numbers, addresses and
 * the enterprise extension): operations on them are dropped, not refused,
 * so an untouched default configuration provisions. Any other unknown name
 * is 400 invalidPath.
 */
const IGNORED: Record<ScimPatchSchema, ReadonlySet<string>> = {
  User: new Set(
    [
      'title',
      'nickName',
      'profileUrl',
      'userType',
      'preferredLanguage',
      'locale',
      'timezone',
      'phoneNumbers',
      'addresses',
      'ims',
      'photos',
      'entitlements',
      'roles',
      'x509Certificates',
      'password',
    ].map((name) => name.toLowerCase()),
  ),
  Group: new Set(),
};
const EXTENSION = /^urn:ietf:params:scim:schemas:extension:/i;

/** Whether a path names an attribute the service ignores (see IGNORED). */
export function isIgnoredPath(path: string, schema: ScimPatchSchema): boolean {
  const { urn } = PATCH_SCHEMAS[schema];
  const rest = path.trim();
  if (EXTENSION.test(rest)) return true;
  const name = rest.toLowerCase().startsWith(`${urn.toLowerCase()}:`) ? rest.slice(urn.length + 1) : rest;
  return IGNORED[schema].has(name.split(/[.[]/, 1)[0]!.trim().toLowerCase());
}

/** A parsed PATCH path. */
export interface ScimPatchPath {
  /** As sent, for error details. */
  text: string;
  attribute: ScimPatchAttribute;
  /** `attr[filter]`: which values of a multi-valued attribute. */
  filter?: ScimFilter;
  /** `attr.sub` or `attr[filter].sub`. */
  subAttribute?: ScimPatchAttribute;
}

export type ScimPatchOp = 'add' | 'replace' | 'remove';

export interface ScimPatchOperation {
  op: ScimPatchOp;
  path: ScimPatchPath;
  /**
   * Checked and normalized: canonical sub-attribute names, booleans as
   * booleans, a multi-valued attribute's values as an array. `null` unassigns.
   * Absent only for `remove`.
   */
  value?: unknown;
}

export const findAttribute = (attributes: readonly ScimPatchAttribute[] | undefined, name: string) =>
  attributes?.find((attribute) => attribute.name.toLowerCase() === name.toLowerCase());

/** A value filter's attributes: the sub-attributes of the multi-valued one, relative to one value. */
function valueFilterAttributes(attribute: ScimPatchAttribute): ScimAttributeMap {
  return Object.fromEntries(
    (attribute.subAttributes ?? []).map((sub) => [
      sub.name.toLowerCase(),
      { type: sub.type === 'boolean' ? 'boolean' : 'string', caseExact: sub.caseExact ?? false, column: sub.name },
    ]),
  );
}

/** The index of the `]` closing the `[` at `open`, outside quoted strings; -1 if none. */
function closing(path: string, open: number): number {
  let quoted = false;
  for (let i = open + 1; i < path.length; i++) {
    if (quoted && path[i] === '\\') i++;
    else if (path[i] === '"') quoted = !quoted;
    else if (!quoted && path[i] === ']') return i;
  }
  return -1;
}

const NAME = /^[A-Za-z$][\w$-]*$/;

export function parsePatchPath(path: string, schema: ScimPatchSchema): ScimPatchPath {
  const invalid = (why: string) => badRequest('invalidPath', `Invalid path "${path}": ${why}`);
  const { urn, attributes } = PATCH_SCHEMAS[schema];
  let rest = path.trim();
  if (rest.toLowerCase().startsWith(`${urn.toLowerCase()}:`)) rest = rest.slice(urn.length + 1);
  else if (/^urn:/i.test(rest)) throw invalid('the service keeps no attribute of that schema');
  let filterText: string | undefined;
  let head = rest;
  let tail = '';
  const open = rest.indexOf('[');
  if (open !== -1) {
    const close = closing(rest, open);
    if (close === -1) throw invalid('unclosed "["');
    head = rest.slice(0, open);
    filterText = rest.slice(open + 1, close);
    tail = rest.slice(close + 1);
    if (tail !== '' && !tail.startsWith('.')) throw invalid(`unexpected "${tail}"`);
    tail = tail.slice(1);
  } else {
    const dot = rest.indexOf('.');
    if (dot !== -1) [head, tail] = [rest.slice(0, dot), rest.slice(dot + 1)];
  }
  if (!NAME.test(head) || (tail !== '' && !NAME.test(tail))) throw invalid('not an attribute path');
  const attribute = findAttribute(attributes, head);
  if (!attribute) throw invalid(`no attribute "${head}" on a ${schema}`);
  const parsed: ScimPatchPath = { text: path, attribute };
  if (tail !== '') {
    const subAttribute = findAttribute(attribute.subAttributes, tail);
    if (!subAttribute) throw invalid(`no sub-attribute "${tail}" of ${attribute.name}`);
    parsed.subAttribute = subAttribute;
  }
  if (filterText !== undefined) {
    if (!attribute.multiValued || attribute.type !== 'complex') throw invalid(`${attribute.name} is not multi-valued`);
    parsed.filter = parseScimFilter(filterText, valueFilterAttributes(attribute));
  }
  return parsed;
}
