import { swaggerUI } from '@hono/swagger-ui';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { COOKIE_PREFIX } from '../auth/auth.js';
import { libraryOperations } from '../library/document.js';
import { access, guard } from '../middleware/guard.js';
import { REQUEST_ID_HEADER } from '../router.js';
import type { AppEnv } from '../shared/types.js';

export const SWAGGER_UI_VERSION = '5.35.0';

/** What holds for every operation, and so is said once. */
const DESCRIPTION = [
  "Multi-tenant authentication, authorization and API keys. `/api/auth/*` is the auth library's door (better-auth): every route of it the service serves is described here, with its access and bounded input as the service checks them; its answers are the library's (tagged `Auth: ...`), and its refusals come in the same error shape with the library's own codes. Anything else under `/api/auth` answers 404.",
  '',
  '- Every answer carries `X-Request-Id` (`#/components/headers/XRequestId`), errors and answers of the auth library included.',
  '- Every error is `{ code, message, details? }` (`#/components/schemas/Error`).',
  '- No string may contain NUL (U+0000), in a JSON body (values and keys), a query parameter or a path parameter: 400 `VALIDATION_ERROR`. A body sent as `application/json` is parsed on every route, even one that takes none, so any operation can answer 400 to a malformed one.',
  "- A method a documented path does not serve answers 405 `METHOD_NOT_ALLOWED` with an `Allow` header naming the ones it does (the auth library's paths too); an unknown path answers 404 `NOT_FOUND`.",
  '- `x-access` states who may call an operation, as the service checks it: `public`, `optional-auth`, or a session with its platform roles, active organization, permissions, `allowedWhileScheduledForDeletion` and `stepUp` (a sensitive action: the session must have proved every factor of its account within STEP_UP_MAX_AGE, else 403 `STEP_UP_REQUIRED`; no API key performs one).',
].join('\n');

/**
 * `/api/openapi.json` (OpenAPI 3.1, generated from the routes' own zod
 * schemas) and `/api/docs` (interactive UI), both behind DOCS_ENABLED
 * (default: on in development, off in production). When off they are not
 * routes at all: 404 to every method, like any unknown path (a 405 would
 * say they exist).
 */
export function mountDocs(app: OpenAPIHono<AppEnv>, { enabled, serverUrl }: { enabled: boolean; serverUrl: string }) {
  // One scheme per name the session cookie has: an apiKey scheme names exactly one cookie.
  app.openAPIRegistry.registerComponent('securitySchemes', 'sessionCookie', {
    type: 'apiKey',
    in: 'cookie',
    name: `${COOKIE_PREFIX}.session_token`,
    description: 'The session cookie set by sign-in, under this name when AUTH_URL is http (development)',
  });
  app.openAPIRegistry.registerComponent('securitySchemes', 'secureSessionCookie', {
    type: 'apiKey',
    in: 'cookie',
    name: `__Secure-${COOKIE_PREFIX}.session_token`,
    description: 'The session cookie set by sign-in, under this name when AUTH_URL is https (production)',
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

  if (!enabled) return;
  // The auth library's routes, described from the rows that serve them, as the service's are.
  for (const operation of libraryOperations()) app.openAPIRegistry.registerPath(operation);
  app.get('/api/openapi.json', guard(access.public()), (c) =>
    c.json(
      app.getOpenAPI31Document({
        openapi: '3.1.0',
        info: {
          title: 'Gatehouse',
          version: '0.1.0',
          description: DESCRIPTION,
        },
        servers: [{ url: serverUrl }],
      }),
    ),
  );
  // The UI's assets come from the CDN the CSP names ({cdn_host}), pinned to the version the tests render.
  app.get('/api/docs', guard(access.public()), swaggerUI({ url: '/api/openapi.json', version: SWAGGER_UI_VERSION }));
}
