import { z } from '@hono/zod-openapi';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { organizationSecurity, updateOrganizationSecurity } from '../db/queries/organizations.js';
import { access, sessionOf, tenantOf } from '../middleware/guard.js';
import { createRouter, defineRoute } from '../router.js';
import { ApiError } from '../shared/errors.js';
import { updateBody } from './schemas.js';

const SecuritySchema = z.object({ requireMfa: z.boolean(), requireSso: z.boolean() }).openapi('OrganizationSecurity');
const SecurityUpdateSchema = updateBody('OrganizationSecurityUpdate', {
  requireMfa: z.boolean().optional(),
  requireSso: z.boolean().optional(),
});

const readRoute = defineRoute({
  method: 'get',
  path: '/api/organization/security',
  access: access.tenant(['organizations:read'], { apiKeys: true }),
  summary: "The active organization's security policy",
  responses: {
    200: { description: 'The policy', content: { 'application/json': { schema: SecuritySchema } } },
  },
});

const updateRoute = defineRoute({
  method: 'patch',
  path: '/api/organization/security',
  // A security policy (docs/security.md "Sensitive actions and step-up").
  access: access.tenant(['organizations:write'], { apiKeys: false, sensitive: true }),
  summary: "Change the active organization's security policy",
  description:
    'Either policy or both; the other stays as it is. While `requireMfa` is on, every route that needs the ' +
    'active organization answers 403 MFA_REQUIRED to a session that is not multi-factor; turning it on from ' +
    'such a session is refused the same way. While `requireSso` is on, members whose email is at a verified ' +
    'domain of the organization get 403 SSO_REQUIRED there unless the session came through one of its ' +
    'connections; Owners keep their other sign-in as break-glass, audited `sso.bypassed` once per session.',
  request: { body: { content: { 'application/json': { schema: SecurityUpdateSchema } }, required: true } },
  responses: {
    200: { description: 'The policy as stored', content: { 'application/json': { schema: SecuritySchema } } },
  },
});

/**
 * README "Multi-factor authentication" and docs/sso.md "Policy": GET/PATCH
 * /api/organization/security, audited as `organization.security_updated`.
 */
export function organizationSecurityRoutes({ db }: { db: Kysely<Database> }) {
  return createRouter()
    .openapi(readRoute, async (c) => {
      const organizationId = tenantOf(c);
      return c.json(await organizationSecurity(db, organizationId), 200);
    })
    .openapi(updateRoute, async (c) => {
      const actor = sessionOf(c);
      const change = c.req.valid('json');
      // Nobody locks themselves out: only a multi-factor session turns it on (a key is not a session).
      if (change.requireMfa && !actor.apiKey && !actor.session.mfa)
        throw new ApiError('MFA_REQUIRED', 'Multi-factor authentication required');
      // requireSso needs nothing more: it binds only members whose email is at
      // a verified domain (none yet: nobody), and the Owners keep their other
      // sign-in as break-glass, so the organization is never locked out of
      // turning it off again. A member at such a domain (the caller too) works
      // there through its single sign-on from the next request on.
      const updated = await updateOrganizationSecurity(db, {
        organizationId: tenantOf(c),
        change,
        actorId: actor.user.id,
      });
      return c.json(updated, 200);
    });
}
