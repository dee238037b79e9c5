import { z } from '@hono/zod-openapi';
import { access, loadSession } from '../middleware/guard.js';
import { PLATFORM_ROLES } from '../permissions.js';
import { createRouter, defineRoute } from '../router.js';

export const EnrichedSessionSchema = z
  .object({
    user: z.object({
      id: z.uuid(),
      email: z.string(),
      name: z.string(),
      role: z.enum(PLATFORM_ROLES),
      emailVerified: z.boolean(),
      twoFactorEnabled: z.boolean(),
    }),
    session: z.object({
      id: z.uuid(),
      activeOrganizationId: z.uuid().nullable(),
      expiresAt: z.iso.datetime(),
      /** Created by a passkey, or completed a second factor. */
      mfa: z.boolean(),
    }),
    permissions: z.array(z.string()),
  })
  .openapi('EnrichedSession');

const route = defineRoute({
  method: 'get',
  path: '/api/session',
  access: access.optional(),
  summary: 'The enriched session of the caller, or null when signed out',
  responses: {
    200: {
      description: 'The enriched session, or null',
      content: { 'application/json': { schema: EnrichedSessionSchema.nullable() } },
    },
  },
});

/** API.md: GET /api/session (optional-auth; allowlisted for accounts scheduled for deletion). */
export function sessionRoutes() {
  return createRouter().openapi(route, async (c) => {
    const session = await loadSession(c);
    // An API key is not a session: it is answered as signed out here.
    if (!session || session.apiKey) return c.json(null, 200);
    const { user, session: current, permissions } = session;
    return c.json({ user, session: current, permissions }, 200);
  });
}
