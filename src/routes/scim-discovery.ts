import type { Context } from 'hono';
import { requireJson } from '../middleware/body-limit.js';
import { access, guard } from '../middleware/guard.js';
import { renderError } from '../middleware/render-error.js';
import { SCIM_PREFIX, scimHandover, scimJson } from '../middleware/scim.js';
import { createRouter, notFoundAnswer } from '../router.js';
import { LIST_RESPONSE_URN, RESOURCE_TYPES, SCHEMAS, SERVICE_PROVIDER_CONFIG } from '../scim/discovery.js';
import { ScimError } from '../scim/errors.js';
import type { AppEnv } from '../shared/types.js';

/**
 * SCIM's own router, behind its door (src/middleware/scim.ts), with its
 * discovery endpoints (RFC 7644 §4): ServiceProviderConfig, ResourceTypes
 * and Schemas, each asking for a token like every SCIM endpoint. The
 * resources are mounted on it (src/app.ts). Not in the OpenAPI document:
 * these endpoints are described by their own Schemas and ResourceTypes.
 * Errors, 404 and 405 included, are SCIM's (render-error.ts).
 */
export function scimService({ authUrl }: { authUrl: string }) {
  const base = `${authUrl.replace(/\/+$/, '')}${SCIM_PREFIX}`;
  const scim = guard(access.scim());
  const meta = (resourceType: string, path: string) => ({ meta: { resourceType, location: `${base}${path}` } });
  const schemas = SCHEMAS.map((schema) => ({ ...schema, ...meta('Schema', `/Schemas/${schema.id}`) }));
  const types = RESOURCE_TYPES.map((type) => ({ ...type, ...meta('ResourceType', `/ResourceTypes/${type.id}`) }));
  const list = (resources: unknown[]) => ({
    schemas: [LIST_RESPONSE_URN],
    totalResults: resources.length,
    itemsPerPage: resources.length,
    startIndex: 1,
    Resources: resources,
  });
  // RFC 7644 §4: a filter here is refused rather than ignored, so no client takes the whole list for a match.
  const noFilter = (c: Context<AppEnv>) => {
    if (c.req.query('filter') !== undefined) throw new ScimError(403, undefined, 'Filtering is not supported here');
  };
  const notFound = (what: string) => new ScimError(404, undefined, `${what} not found`);

  const service = createRouter();
  service.use('*', scimHandover());
  // Bodies are JSON: `application/scim+json` or `application/json` (RFC 7644 §3.1), else 415.
  service.use('*', requireJson());
  service
    .get(`${SCIM_PREFIX}/ServiceProviderConfig`, scim, (c) =>
      scimJson(c, { ...SERVICE_PROVIDER_CONFIG, ...meta('ServiceProviderConfig', '/ServiceProviderConfig') }),
    )
    .get(`${SCIM_PREFIX}/ResourceTypes`, scim, (c) => {
      noFilter(c);
      return scimJson(c, list(types));
    })
    .get(`${SCIM_PREFIX}/ResourceTypes/:name`, scim, (c) => {
      const type = types.find((candidate) => candidate.id === c.req.param('name'));
      if (!type) throw notFound('Resource type');
      return scimJson(c, type);
    })
    .get(`${SCIM_PREFIX}/Schemas`, scim, (c) => {
      noFilter(c);
      return scimJson(c, list(schemas));
    })
    .get(`${SCIM_PREFIX}/Schemas/:id`, scim, (c) => {
      const schema = schemas.find((candidate) => candidate.id === c.req.param('id'));
      if (!schema) throw notFound('Schema');
      return scimJson(c, schema);
    });
  service.notFound(notFoundAnswer(service));
  service.onError(renderError);
  return service;
}
