import { swaggerUI } from '@hono/swagger-ui';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { ApiError } from '../errors.js';
import { access, guard } from '../middleware/guard.js';
import { REQUEST_ID_HEADER } from '../router.js';
import type { AppEnv } from '../types.js';

export const SWAGGER_UI_VERSION = '5.35.0';

/**
 * `/api/openapi.json` (OpenAPI 3.1, generated from the routes' own zod
 * schemas) and `/api/docs` (interactive UI), both behind DOCS_ENABLED
 * (default: on in development, off in production); 404 when off.
 */
export function mountDocs(app: OpenAPIHono<AppEnv>, { enabled, serverUrl }: { enabled: boolean; serverUrl: string }) {
  const notFound = () => {
    throw new ApiError('NOT_FOUND', 'Not found');
  };
  app.openAPIRegistry.registerComponent('securitySchemes', 'sessionCookie', {
    type: 'apiKey',
    in: 'cookie',
    name: 'gatehouse.session_token',
    description: 'The session cookie set by sign-in (`__Secure-gatehouse.session_token` over https)',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'apiKey', {
    type: 'http',
    scheme: 'bearer',
    description: '`sk_live_…` API key; authenticates permission-guarded tenant routes only when API_KEY_AUTH=enabled',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'cronSecret', {
    type: 'http',
    scheme: 'bearer',
    description: 'CRON_SECRET',
  });
  // Referenced by every response object (router.ts defineRoute).
  app.openAPIRegistry.registerComponent('headers', REQUEST_ID_HEADER.name, REQUEST_ID_HEADER.header);

  app.get('/api/openapi.json', guard(access.public()), (c) => {
    if (!enabled) return notFound();
    return c.json(
      app.getOpenAPI31Document({
        openapi: '3.1.0',
        info: {
          title: 'Gatehouse',
          version: '0.1.0',
          description:
            'Multi-tenant authentication, authorization and API keys. `/api/auth/*` is served by better-auth and not described here beyond the routes this service adds.',
        },
        servers: [{ url: serverUrl }],
      }),
    );
  });
  // The UI's assets come from the CDN the CSP names ({cdn_host}), pinned to the version the tests render.
  app.get(
    '/api/docs',
    guard(access.public()),
    enabled ? swaggerUI({ url: '/api/openapi.json', version: SWAGGER_UI_VERSION }) : notFound,
  );
}
