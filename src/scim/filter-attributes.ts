import type { ScimAttributeMap } from './filter.js';

/**
 * What the lists filter on (docs/scim.md), for parseScimFilter. Case rules
 * from RFC 7643 section 4: userName, displayName and emails compare
 * case-insensitively; id and externalId exactly. `column` is the attribute's
 * canonical name, which the database layer maps to a column.
 */
export const USER_FILTER_ATTRIBUTES: ScimAttributeMap = {
  id: { type: 'string', caseExact: true, column: 'id' },
  externalid: { type: 'string', caseExact: true, column: 'externalId' },
  username: { type: 'string', caseExact: false, column: 'userName' },
  displayname: { type: 'string', caseExact: false, column: 'displayName' },
  'name.formatted': { type: 'string', caseExact: false, column: 'name.formatted' },
  active: { type: 'boolean', caseExact: false, column: 'active' },
  'emails.value': { type: 'string', caseExact: false, column: 'emails.value' },
  'emails.type': { type: 'string', caseExact: false, column: 'emails.type' },
  'emails.primary': { type: 'boolean', caseExact: false, column: 'emails.primary' },
  'meta.created': { type: 'dateTime', caseExact: false, column: 'meta.created' },
  'meta.lastmodified': { type: 'dateTime', caseExact: false, column: 'meta.lastModified' },
};

export const GROUP_FILTER_ATTRIBUTES: ScimAttributeMap = {
  id: { type: 'string', caseExact: true, column: 'id' },
  externalid: { type: 'string', caseExact: true, column: 'externalId' },
  displayname: { type: 'string', caseExact: false, column: 'displayName' },
  'members.value': { type: 'string', caseExact: true, column: 'members.value' },
  'meta.created': { type: 'dateTime', caseExact: false, column: 'meta.created' },
  'meta.lastmodified': { type: 'dateTime', caseExact: false, column: 'meta.lastModified' },
};
