import { z } from '@hono/zod-openapi';
import type { Auth } from '../auth/auth.js';
import type { Config } from '../config.js';
import { ApiError } from '../errors.js';
import { access, guard } from '../middleware/guard.js';
import { createRouter, defineRoute } from '../router.js';

const providersRoute = defineRoute({
  method: 'get',
  path: '/api/auth/providers',
  access: access.public(),
  summary: 'Which OAuth providers are enabled',
  responses: {
    200: {
      description: 'One boolean per provider',
      content: { 'application/json': { schema: z.object({ google: z.boolean(), github: z.boolean() }).openapi('Providers') } },
    },
  },
});

/**
 * `/api/auth/*` is the library's (spec §4): the request goes to its handler
 * as it came, behind the same middleware chain. Its own errors already have
 * the contract's `{ code, message }` shape; its bare 404s get ours.
 */
export function authRoutes({ auth, config }: { auth: Auth; config: Config }) {
  const router = createRouter();
  router.openapi(providersRoute, (c) => c.json({ google: config.oauth.google !== null, github: config.oauth.github !== null }, 200));
  router.on(['GET', 'POST'], '/api/auth/*', guard(access.public()), async (c) => {
    const response = await auth.handler(c.req.raw);
    if (response.status === 404 && !response.headers.get('content-type')?.includes('json')) {
      throw new ApiError('NOT_FOUND', 'Not found');
    }
    return response;
  });
  return router;
}
