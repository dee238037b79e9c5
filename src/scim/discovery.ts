/**
 * What the SCIM service says of itself (RFC 7643 §5-7; RFC 7644 §4): exactly
 * what it supports, for directories that read it before they provision.
 * Pure data; the routes add `meta.location` under AUTH_URL.
 */
const CORE = 'urn:ietf:params:scim:schemas:core:2.0';
export const USER_SCHEMA_URN = `${CORE}:User`;
export const GROUP_SCHEMA_URN = `${CORE}:Group`;
export const LIST_RESPONSE_URN = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
/** RFC 7644 §3.4.2.4: a list answers at most this many resources, whatever `count` asks. */
export const MAX_RESULTS = 200;

export const SERVICE_PROVIDER_CONFIG = {
  schemas: [`${CORE}:ServiceProviderConfig`],
  patch: { supported: true },
  bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
  filter: { supported: true, maxResults: MAX_RESULTS },
  changePassword: { supported: false },
  sort: { supported: false },
  etag: { supported: true },
  authenticationSchemes: [
    {
      type: 'oauthbearertoken',
      name: 'OAuth Bearer Token',
      description:
        "A SCIM token of the organization (scim_…), created by its Owner or Admin; sent as 'Authorization: Bearer'",
      specUri: 'https://www.rfc-editor.org/info/rfc6750',
      primary: true,
    },
  ],
} as const;

interface Attribute {
  name: string;
  type: 'string' | 'boolean' | 'complex' | 'reference';
  multiValued: boolean;
  description: string;
  required: boolean;
  caseExact: boolean;
  mutability: 'readOnly' | 'readWrite' | 'immutable' | 'writeOnly';
  returned: 'always' | 'never' | 'default' | 'request';
  uniqueness: 'none' | 'server' | 'global';
  subAttributes?: Attribute[];
  referenceTypes?: string[];
  canonicalValues?: string[];
}

const attribute = (
  name: string,
  description: string,
  options: Partial<Omit<Attribute, 'name' | 'description'>> = {},
): Attribute => ({
  name,
  type: 'string',
  multiValued: false,
  description,
  required: false,
  caseExact: false,
  mutability: 'readWrite',
  returned: 'default',
  uniqueness: 'none',
  ...options,
});

const USER_ATTRIBUTES: Attribute[] = [
  attribute('userName', "The member's email address; unique in the organization, compared case-insensitively", {
    required: true,
    uniqueness: 'server',
  }),
  attribute('name', "The member's name", {
    type: 'complex',
    subAttributes: [
      attribute('formatted', 'The full name, as the account shows it'),
      attribute('familyName', 'The family name'),
      attribute('givenName', 'The given name'),
    ],
  }),
  attribute('displayName', "The account's name"),
  attribute('emails', 'The email address (the userName); one, work, primary', {
    type: 'complex',
    multiValued: true,
    subAttributes: [
      attribute('value', 'The address'),
      attribute('type', 'Its kind', { canonicalValues: ['work'] }),
      attribute('primary', 'Always true', { type: 'boolean' }),
    ],
  }),
  attribute('active', 'false: no longer a member of the organization (the resource stays)', { type: 'boolean' }),
  attribute('groups', 'The groups the member is in; changed through the Groups', {
    type: 'complex',
    multiValued: true,
    mutability: 'readOnly',
    subAttributes: [
      attribute('value', "The group's id", { mutability: 'readOnly' }),
      attribute('$ref', "The group's URI", {
        type: 'reference',
        referenceTypes: ['Group'],
        mutability: 'readOnly',
      }),
      attribute('display', "The group's displayName", { mutability: 'readOnly' }),
    ],
  }),
];

const GROUP_ATTRIBUTES: Attribute[] = [
  attribute('displayName', 'The group name; unique in the organization, compared case-insensitively', {
    required: true,
    uniqueness: 'server',
  }),
  attribute('members', 'The Users in the group', {
    type: 'complex',
    multiValued: true,
    subAttributes: [
      attribute('value', "The User's id", { mutability: 'immutable', caseExact: true }),
      attribute('$ref', "The User's URI", { type: 'reference', referenceTypes: ['User'], mutability: 'immutable' }),
      attribute('display', "The User's displayName", { mutability: 'readOnly' }),
    ],
  }),
];

export const SCHEMAS = [
  { id: USER_SCHEMA_URN, name: 'User', description: 'A member of the organization', attributes: USER_ATTRIBUTES },
  {
    id: GROUP_SCHEMA_URN,
    name: 'Group',
    description: "A group of the organization's Users",
    attributes: GROUP_ATTRIBUTES,
  },
].map((schema) => ({ schemas: [`${CORE}:Schema`], ...schema }));

export const RESOURCE_TYPES = [
  {
    id: 'User',
    name: 'User',
    endpoint: '/Users',
    description: 'A member of the organization',
    schema: USER_SCHEMA_URN,
  },
  { id: 'Group', name: 'Group', endpoint: '/Groups', description: 'A group of Users', schema: GROUP_SCHEMA_URN },
].map((type) => ({ schemas: [`${CORE}:ResourceType`], ...type }));
