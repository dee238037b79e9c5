import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import {
  type ConnectionRow,
  connectionTypeById,
  createConnection,
  deleteConnection,
  getConnection,
  listConnections,
  updateConnection,
} from '../db/queries/sso-connections.js';
import { access, sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute, jsonContent } from '../router.js';
import { ApiError } from '../shared/errors.js';
import type { SecretBox } from '../shared/secret-box.js';
import { spUrls, storedSettings } from '../sso/connection-settings.js';
import { SsoConfigError } from '../sso/errors.js';
import type { SsoFetchPolicy } from '../sso/fetch.js';
import { spMetadata } from '../sso/saml.js';
import {
  CreateSsoConnectionSchema,
  IdParams,
  SSO_ACCESS,
  SSO_FIELDS,
  SsoConnectionSchema,
  updateBody,
} from './schemas.js';

const UpdateSsoConnectionSchema = updateBody('UpdateSsoConnection', {
  type: z.enum(['oidc', 'saml']).optional().describe('The type it has: a connection never changes type'),
  enabled: z.boolean().optional().describe('false ends every session the connection created'),
  ...z.object(SSO_FIELDS).partial().shape,
});

const DEFAULT_SCOPES = ['openid', 'email', 'profile'];

const { read, write } = SSO_ACCESS;

const listRoute = defineRoute({
  method: 'get',
  path: '/api/sso/connections',
  access: read,
  summary: "The active organization's identity providers (never a client secret)",
  responses: { 200: jsonContent(z.array(SsoConnectionSchema), 'Connections, oldest first') },
});

const createRoute = defineRoute({
  method: 'post',
  path: '/api/sso/connections',
  access: write,
  summary: 'Connect an identity provider over OIDC (its issuer is discovered) or SAML 2.0',
  description:
    'Roles named (`defaultRoleId`, `roleMappings[].roleId`) must be roles of the organization (400) that the ' +
    'caller may grant (403 INSUFFICIENT_PERMISSIONS). An issuer whose discovery fails is a 400 naming `issuer`.',
  request: { body: { content: { 'application/json': { schema: CreateSsoConnectionSchema } }, required: true } },
  responses: { 201: jsonContent(SsoConnectionSchema, "The connection, with what to enter in the IdP's app (`sp`)") },
});

const updateRoute = defineRoute({
  method: 'patch',
  path: '/api/sso/connections/{id}',
  access: write,
  summary: "Change a connection's settings; a new issuer is discovered again, `enabled: false` ends its sessions",
  request: {
    params: IdParams,
    body: { content: { 'application/json': { schema: UpdateSsoConnectionSchema } }, required: true },
  },
  responses: { 200: jsonContent(SsoConnectionSchema, 'The connection') },
});

const deleteRoute = defineRoute({
  method: 'delete',
  path: '/api/sso/connections/{id}',
  access: write,
  summary: 'Remove a connection; every session it created ends',
  request: { params: IdParams },
  responses: { 200: jsonContent(z.object({ id: z.uuid(), deleted: z.literal(true) }), 'The connection is gone') },
});

const metadataRoute = defineRoute({
  method: 'get',
  path: '/api/sso/connections/{id}/saml-metadata',
  access: access.public(),
  summary: "The service provider's SAML metadata for one SAML connection, for the IdP to import",
  request: { params: IdParams },
  responses: {
    200: {
      description: 'SAML 2.0 metadata: our entity id, the ACS (HTTP-POST), signed assertions wanted',
      content: { 'application/samlmetadata+xml': { schema: z.string() } },
    },
  },
});

const validation = (path: string, message: string) =>
  new ApiError('VALIDATION_ERROR', 'Request validation failed', { details: [{ path, message }] });

/** A configuration the protocol modules refuse, as the client's 400 naming the field. */
async function configured<T>(build: () => T | Promise<T>): Promise<T> {
  try {
    return await build();
  } catch (error) {
    if (error instanceof SsoConfigError) throw validation(error.field, error.message);
    throw error;
  }
}

/** docs/sso.md "Connections": an organization's identity providers, OIDC or SAML 2.0. */
export function ssoConnectionRoutes({
  db,
  authUrl,
  secrets,
  policy,
}: {
  db: Kysely<Database>;
  /** AUTH_URL: the service provider's URLs are under it. */
  authUrl: string;
  /** Client secrets at rest. */
  secrets: SecretBox;
  /** How discovery reaches an issuer (address rules; pinned connections on Node); https only in production. */
  policy: SsoFetchPolicy;
}) {
  const urls = spUrls(authUrl);
  const deps = { policy, secrets };
  const toConnection = (row: ConnectionRow): z.infer<typeof SsoConnectionSchema> => {
    const common = {
      id: row.id,
      name: row.name,
      enabled: row.enabled,
      defaultRoleId: row.default_role_id,
      roleMappings: row.role_mappings.map(({ claim, value, roleId }) => ({ claim, value, roleId })),
      mfaAtIdp: row.mfa_at_idp,
      createdAt: new Date(row.created_at).toISOString(),
      updatedAt: new Date(row.updated_at).toISOString(),
    };
    const { redirectUri, ...saml } = urls(row.id);
    return row.type === 'oidc'
      ? {
          type: 'oidc',
          ...common,
          issuer: row.oidc_issuer!,
          clientId: row.oidc_client_id!,
          scopes: row.oidc_scopes!,
          sp: { redirectUri },
        }
      : {
          type: 'saml',
          ...common,
          idpEntityId: row.saml_idp_entity_id!,
          entryPoint: row.saml_entry_point!,
          allowIdpInitiated: row.allow_idp_initiated,
          sp: saml,
        };
  };

  const actorOf = (c: Parameters<typeof sessionOf>[0]) => ({ tenantId: tenantOf(c), caller: sessionOf(c) });

  return createRouter()
    .openapi(listRoute, async (c) => {
      const rows = await listConnections(db, tenantOf(c));
      return c.json(rows.map(toConnection), 200);
    })
    .openapi(createRoute, async (c) => {
      const body = c.req.valid('json');
      const scopes = body.type === 'oidc' ? { oidc_scopes: body.scopes ?? DEFAULT_SCOPES } : {};
      const settings = await configured(() => storedSettings(body.type, body, deps));
      const row = await createConnection(db, { type: body.type, name: body.name, ...scopes, ...settings }, actorOf(c));
      return c.json(toConnection(row), 201);
    })
    .openapi(updateRoute, async (c) => {
      const { id } = c.req.valid('param');
      const body = c.req.valid('json');
      const actor = actorOf(c);
      const { type } = await getConnection(db, actor.tenantId, id);
      if (body.type !== undefined && body.type !== type)
        throw validation('type', 'a connection keeps its type; create another connection instead');
      const { type: _, ...settings } = body;
      const changes = await configured(() => storedSettings(type, settings, deps));
      const row = await updateConnection(db, id, changes, Object.keys(settings), actor);
      return c.json(toConnection(row), 200);
    })
    .openapi(deleteRoute, async (c) => {
      const { id } = c.req.valid('param');
      await deleteConnection(db, id, actorOf(c));
      return c.json({ id, deleted: true as const }, 200);
    })
    .openapi(metadataRoute, async (c) => {
      const { id } = c.req.valid('param');
      if ((await connectionTypeById(db, id)) !== 'saml') throw new ApiError('NOT_FOUND', 'Connection not found');
      const { entityId, acsUrl } = urls(id);
      return c.body(spMetadata({ entityId, acsUrl }), 200, {
        'content-type': 'application/samlmetadata+xml; charset=utf-8',
      });
    });
}
