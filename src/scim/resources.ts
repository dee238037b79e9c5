/**
 * SCIM resources as the service answers them (RFC 7643, RFC 7644; docs/scim.md):
 * `meta`, the ETag, list answers and their paging, and the User resource.
 * Pure: rows in, JSON out.
 */

import { isUuid } from '../shared/text.js';

export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const GROUP_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Group';
export const LIST_RESPONSE_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
export const PATCH_OP_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

/** Where the SCIM service is served, under AUTH_URL. */
export const SCIM_BASE_PATH = '/api/scim/v2';

export type ScimResourceType = 'User' | 'Group';

export interface ScimMeta {
  resourceType: ScimResourceType;
  created: string;
  lastModified: string;
  location: string;
  version: string;
}

/** The stored parts every resource has: its id, times and version. */
export interface StoredResource {
  id: string;
  created: Date;
  lastModified: Date;
  version: number;
}

/** A resource's ETag (RFC 7644 section 3.14): weak, its version. */
export function etagOf(version: number): string {
  return `W/"${version}"`;
}

/**
 * Whether an If-Match header lets a change through (RFC 9110 section
 * 13.1.1): absent, `*`, or a list naming the current ETag (weak or strong
 * form: a client may strip the W/ it was given).
 */
export function ifMatchAllows(header: string | undefined, version: number): boolean {
  if (header === undefined || header.trim() === '*') return true;
  const current = `"${version}"`;
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === current);
}

/**
 * A resource id as stored (a UUID, lower-cased), or null for anything else:
 * such an id names no resource, and must not reach a uuid column (where it
 * is a database error, not a 404).
 */
export function resourceId(value: string | undefined): string | null {
  return value !== undefined && isUuid(value) ? value.toLowerCase() : null;
}

/** The resource's URL: AUTH_URL + /api/scim/v2/<Type>s/<id>. */
export function locationOf(authUrl: string, type: ScimResourceType, id: string): string {
  return `${authUrl.replace(/\/+$/, '')}${SCIM_BASE_PATH}/${type}s/${id}`;
}

export function metaOf(authUrl: string, type: ScimResourceType, resource: StoredResource): ScimMeta {
  return {
    resourceType: type,
    created: resource.created.toISOString(),
    lastModified: resource.lastModified.toISOString(),
    location: locationOf(authUrl, type, resource.id),
    version: etagOf(resource.version),
  };
}

export interface Paging {
  /** 1-based, as asked (at least 1). */
  startIndex: number;
  /** At most MAX_COUNT; 0 asks for the total only. */
  count: number;
  /** Rows to skip: startIndex - 1. */
  offset: number;
}

export const DEFAULT_COUNT = 100;
export const MAX_COUNT = 200;

/**
 * RFC 7644 section 3.4.2.4: a startIndex below 1 is 1, a negative count is
 * 0; a count above MAX_COUNT is MAX_COUNT (ServiceProviderConfig's
 * filter.maxResults); what is not an integer is the default.
 */
export function parsePaging(query: { startIndex?: string; count?: string }): Paging {
  const integer = (value: string | undefined) =>
    value !== undefined && /^\s*[+-]?\d{1,15}\s*$/.test(value) ? Number.parseInt(value, 10) : undefined;
  const startIndex = Math.max(1, integer(query.startIndex) ?? 1);
  const count = Math.min(MAX_COUNT, Math.max(0, integer(query.count) ?? DEFAULT_COUNT));
  return { startIndex, count, offset: startIndex - 1 };
}

export interface ListResponse<T> {
  schemas: [typeof LIST_RESPONSE_SCHEMA];
  totalResults: number;
  startIndex: number;
  itemsPerPage: number;
  Resources: T[];
}

export function listResponse<T>(resources: T[], { totalResults, paging }: { totalResults: number; paging: Paging }) {
  return {
    schemas: [LIST_RESPONSE_SCHEMA],
    totalResults,
    startIndex: paging.startIndex,
    itemsPerPage: resources.length,
    Resources: resources,
  } satisfies ListResponse<T>;
}

/** What the User resource is made of: the account, its SCIM row, its groups. */
export interface ScimUserRecord extends StoredResource {
  /** The account's address: the userName. */
  email: string;
  /** The account's name: name.formatted and displayName. */
  name: string;
  externalId: string | null;
  active: boolean;
  groups: { id: string; displayName: string }[];
}

export interface ScimUserResource {
  schemas: [typeof USER_SCHEMA];
  id: string;
  externalId?: string;
  userName: string;
  name: { formatted: string };
  displayName: string;
  emails: [{ value: string; type: 'work'; primary: true }];
  active: boolean;
  groups: { value: string; display: string; $ref: string }[];
  meta: ScimMeta;
}

/** RFC 7643 section 4.1; `groups` is read-only (changed through the Group resources). */
export function userResource(authUrl: string, user: ScimUserRecord): ScimUserResource {
  return {
    schemas: [USER_SCHEMA],
    id: user.id,
    ...(user.externalId !== null ? { externalId: user.externalId } : {}),
    userName: user.email,
    name: { formatted: user.name },
    displayName: user.name,
    emails: [{ value: user.email, type: 'work', primary: true }],
    active: user.active,
    groups: user.groups.map((group) => ({
      value: group.id,
      display: group.displayName,
      $ref: locationOf(authUrl, 'Group', group.id),
    })),
    meta: metaOf(authUrl, 'User', user),
  };
}
