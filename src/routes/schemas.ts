import { z } from '@hono/zod-openapi';
import type { secondFactorsOf } from '../db/queries/second-factors.js';
import { access } from '../middleware/guard.js';
import { ALL_PERMISSIONS, PERMISSION_COUNT, type Permission } from '../shared/permissions.js';

/**
 * A UUID version 4, as zod checks it, with that check's pattern in the
 * document (zod-openapi writes only `format: uuid`, which any version meets).
 */
export const uuidV4 = () => z.uuidv4().openapi({ pattern: z.regexes.uuid(4).source });

/** A stored time as JSON writes it (ISO 8601 UTC), or null. */
export const isoOrNull = (value: Date | null) => (value ? new Date(value).toISOString() : null);

/** Path ids are UUID version 4 (docs/api.md "Conventions"). */
export const IdParams = z.object({ id: uuidV4().openapi({ param: { name: 'id', in: 'path' } }) });

/**
 * One of the permission strings of the permission table (docs/api.md "Permissions and roles") (`resource:action`), as an
 * enum: a pattern of resources and actions would also admit pairs the table
 * does not have (`api_keys:delete`).
 */
export const PermissionString = z.enum(ALL_PERMISSIONS as readonly [Permission, ...Permission[]], {
  message: 'must be one of the permissions <resource>:<action> of the permission table',
});

/**
 * A list without repeats: the refine enforces it, `uniqueItems` documents it
 * (zod has no such check of its own). Bounds are given here because zod's
 * metadata belongs to one schema instance and `.min()` afterwards would drop it.
 */
export function uniqueArray<T extends z.ZodType>(
  item: T,
  { min, max, what }: { min?: number; max?: number; what: string },
) {
  let list = z.array(item);
  if (min !== undefined) list = list.min(min);
  if (max !== undefined) list = list.max(max);
  return list
    .refine((values) => new Set(values).size === values.length, { message: `must not repeat a ${what}` })
    .openapi({ uniqueItems: true });
}

/** A list of distinct permission strings. */
export const PermissionList = uniqueArray(PermissionString, { max: PERMISSION_COUNT, what: 'permission' });

/**
 * A PATCH body: only the given fields, and at least one of them (enforced by
 * the refine, documented as `minProperties: 1`).
 */
export function updateBody<T extends z.ZodRawShape>(name: string, shape: T) {
  return z
    .object(shape)
    .strict()
    .refine((body) => Object.keys(body).length > 0, {
      message: `give at least one of ${Object.keys(shape).join(', ')}`,
    })
    .openapi(name, { minProperties: 1 });
}

export const RoleSchema = z
  .object({
    id: z.uuid(),
    name: z.string(),
    slug: z.string(),
    description: z.string(),
    permissions: z.array(z.string()),
    isDefault: z.boolean(),
    createdAt: z.iso.datetime(),
    updatedAt: z.iso.datetime(),
  })
  .openapi('Role');

export type RoleRecord = z.infer<typeof RoleSchema>;

export function toRoleRecord(role: {
  id: string;
  name: string;
  slug: string;
  description: string;
  permissions: string[];
  is_default: boolean;
  created_at: Date;
  updated_at: Date;
}): RoleRecord {
  return {
    id: role.id,
    name: role.name,
    slug: role.slug,
    description: role.description,
    permissions: [...role.permissions].sort(),
    isDefault: role.is_default,
    createdAt: new Date(role.created_at).toISOString(),
    updatedAt: new Date(role.updated_at).toISOString(),
  };
}

/** The account export's second factors: metadata only (no secret, no backup code, no key material). */
export const SecondFactorsExportSchema = {
  twoFactor: z
    .object({ enabled: z.boolean(), createdAt: z.iso.datetime(), backupCodesRemaining: z.number().int() })
    .nullable(),
  passkeys: z.array(
    z.object({
      id: z.uuid(),
      name: z.string().nullable(),
      deviceType: z.string(),
      backedUp: z.boolean(),
      transports: z.array(z.string()),
      aaguid: z.string().nullable(),
      createdAt: z.iso.datetime(),
    }),
  ),
};

export function secondFactorsJson({ totp, passkeys }: Awaited<ReturnType<typeof secondFactorsOf>>) {
  return {
    twoFactor: totp ? { ...totp, createdAt: totp.createdAt.toISOString() } : null,
    passkeys: passkeys.map((p) => ({ ...p, createdAt: p.createdAt.toISOString() })),
  };
}

/**
 * Who reaches the webhook routes (routes/webhooks.ts, routes/webhook-deliveries.ts):
 * reading needs organizations:read, changing organizations:write; creating an
 * endpoint or rotating its secret hands out a signing secret, a session's
 * doing, never an API key's.
 */
export const WEBHOOK_ACCESS = {
  read: access.tenant(['organizations:read'], { apiKeys: true }),
  write: access.tenant(['organizations:write'], { apiKeys: true }),
  writeSecret: access.tenant(['organizations:write'], { apiKeys: false }),
};

/**
 * Who reaches the single sign-on routes (routes/sso-connections.ts,
 * routes/sso-domains.ts): reading needs organizations:read; a change adds or
 * removes a way to sign in to the organization, so it needs
 * organizations:write and a fresh session (docs/security.md "Sensitive
 * actions and step-up"). Never an API key, not even to read.
 */
export const SSO_ACCESS = {
  read: access.tenant(['organizations:read'], { apiKeys: false }),
  write: access.tenant(['organizations:write'], { apiKeys: false, sensitive: true }),
};

const SsoUrl = (what: string) => z.string().min(1).max(2048).describe(what).openapi({ format: 'uri' });
/** RFC 6749 §3.3 scope-token. */
const ScopeToken = z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]{1,128}$/, 'must be an OAuth scope token');

/** The fields of a connection's configuration, each optional: POST requires its type's, PATCH takes any. */
export const SSO_FIELDS = {
  name: z.string().min(1).max(100),
  issuer: SsoUrl('OIDC: the issuer; its discovery document must name exactly this issuer'),
  clientId: z.string().min(1).max(256).describe('OIDC'),
  clientSecret: z.string().min(1).max(1024).describe('OIDC; kept sealed, never returned'),
  scopes: uniqueArray(ScopeToken, { min: 1, max: 20, what: 'scope' })
    .refine((scopes) => scopes.includes('openid'), { message: 'must include openid' })
    .describe('OIDC; default ["openid", "email", "profile"]'),
  metadataXml: z.string().min(1).max(262_144).describe("SAML: the IdP's metadata (instead of the next three)"),
  entryPoint: SsoUrl("SAML: the IdP's HTTP-Redirect sign-in URL"),
  idpEntityId: z.string().min(1).max(1024).describe("SAML: the IdP's entity id"),
  idpCertificate: z.string().min(1).max(16_384).describe("SAML: the IdP's signing certificate, PEM or base64 DER"),
  allowIdpInitiated: z.boolean().describe('SAML: accept responses no sign-in of ours asked for'),
  defaultRoleId: uuidV4().nullable().describe('The role people join with; null: Member'),
  roleMappings: z
    .array(
      z
        .object({ claim: z.string().min(1).max(256), value: z.string().min(1).max(1024), roleId: uuidV4() })
        .strict()
        .openapi('SsoRoleMapping'),
    )
    .max(50)
    // The first match wins: a second mapping of the same claim and value would never apply.
    .refine((list) => new Set(list.map((m) => JSON.stringify([m.claim, m.value]))).size === list.length, {
      message: 'must not repeat a claim and value',
    })
    .openapi({ uniqueItems: true })
    .describe('Tried in order at each sign-in; the first whose claim equals (or, a list, contains) value wins'),
  mfaAtIdp: z.boolean().describe("The IdP asks for a second factor: the connection's sessions are multi-factor"),
};

/**
 * One object for both types (the security walks read a body's properties).
 * The refinement requires each type's settings; the other type's are refused
 * where settings are read (sso/connection-settings.ts), for PATCH too.
 */
export const CreateSsoConnectionSchema = z
  .object({
    type: z.enum(['oidc', 'saml']),
    name: SSO_FIELDS.name,
    ...z.object(SSO_FIELDS).omit({ name: true }).partial().shape,
  })
  .strict()
  .superRefine((body, ctx) => {
    const [required, message] =
      body.type === 'oidc'
        ? [['issuer', 'clientId', 'clientSecret'] as const, 'required for an OIDC connection']
        : [
            body.metadataXml === undefined ? (['entryPoint', 'idpEntityId', 'idpCertificate'] as const) : [],
            'required without metadataXml',
          ];
    for (const field of required)
      if (body[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message });
  })
  .openapi('CreateSsoConnection', {
    description:
      'OIDC: `issuer`, `clientId`, `clientSecret`, optional `scopes`. SAML: `metadataXml`, or `entryPoint`, ' +
      '`idpEntityId` and `idpCertificate`; optional `allowIdpInitiated`. Either: `defaultRoleId`, `roleMappings`, `mfaAtIdp`.',
  });

const SsoConnectionBase = {
  id: z.uuid(),
  name: z.string(),
  enabled: z.boolean(),
  defaultRoleId: z.uuid().nullable(),
  roleMappings: z.array(z.object({ claim: z.string(), value: z.string(), roleId: z.uuid() })),
  mfaAtIdp: z.boolean(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
};

export const SsoConnectionSchema = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('oidc'), ...SsoConnectionBase, issuer: z.string(), clientId: z.string() }).extend({
      scopes: z.array(z.string()),
      sp: z.object({ redirectUri: z.string().describe("The IdP's redirect URI for this connection") }),
    }),
    z
      .object({ type: z.literal('saml'), ...SsoConnectionBase, idpEntityId: z.string(), entryPoint: z.string() })
      .extend({
        allowIdpInitiated: z.boolean(),
        sp: z.object({
          entityId: z.string().describe('Our entity id: the metadata URL'),
          acsUrl: z.string().describe('Where the IdP posts its response'),
          metadataUrl: z.string().describe("Our metadata, for the IdP's import"),
        }),
      }),
  ])
  .openapi('SsoConnection');
