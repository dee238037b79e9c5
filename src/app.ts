import { ApiError, renderError } from './errors.js';
import { accessLog, requestId } from './middleware/request-context.js';
import { securityHeaders } from './middleware/security-headers.js';
import { cors } from './middleware/cors.js';
import { bodyLimit } from './middleware/body-limit.js';
import { rateLimit, type RateLimitOptions } from './middleware/rate-limit.js';
import { createRouter } from './router.js';
import { healthRoutes } from './routes/health.js';
import type { AppDeps } from './types.js';

export interface CreateAppOptions {
  /** How the entry finds the client address (Node: x-forwarded-for, else the socket; Workers: CF-Connecting-IP). */
  clientIp?: RateLimitOptions['clientIp'];
}

/**
 * The whole service: one middleware chain (request id and access log,
 * security headers, CORS, body limit, rate limit; session and guard come
 * next), then the route files. Composes; holds no logic.
 */
export function createApp(deps: AppDeps, options: CreateAppOptions = {}) {
  const { config, database, rateLimitStore, logger, clock = () => new Date() } = deps;
  const app = createRouter();

  app.use('*', requestId());
  app.use('*', accessLog({ logger }));
  app.use('*', securityHeaders(config.csp));
  app.use('*', cors({ origins: config.cors.origins }));
  app.use('*', bodyLimit());
  app.use('*', rateLimit({ config: config.rateLimit, store: rateLimitStore, clientIp: options.clientIp, clock }));

  app.route('/', healthRoutes({ db: database.db }));

  app.notFound((c) => renderError(new ApiError('NOT_FOUND', 'Not found'), c));
  app.onError(renderError);
  return app;
}

export type App = ReturnType<typeof createApp>;
