import type { MiddlewareHandler } from 'hono';
import { createApiKeyResolver } from './auth/api-key-auth.js';
import { createAuth } from './auth/auth.js';
import { createCookieCacheVerifier } from './auth/cookie-cache.js';
import { createMailer, type Mailer } from './auth/email.js';
import { budgetedMailer } from './auth/mail-budget.js';
import { createScimTokenResolver } from './auth/scim-auth.js';
import { type NoticeOrigin, notifySecurityEvent, type SecurityEvent } from './auth/security-notices.js';
import { createSessionResolver } from './auth/session.js';
import type { SessionStateCache } from './auth/session-state-cache.js';
import type { DatabaseHandle } from './db/client.js';
import type { SessionStateRow } from './db/queries/session-state.js';
import { bodyLimit } from './middleware/body-limit.js';
import { cors } from './middleware/cors.js';
import { csrf } from './middleware/csrf.js';
import { denyUndeclared } from './middleware/guard.js';
import { jsonInput } from './middleware/json-input.js';
import { type RateLimitOptions, rateLimit, rateLimitTiers } from './middleware/rate-limit.js';
import { renderError } from './middleware/render-error.js';
import { accessLog, requestId } from './middleware/request-context.js';
import { outsideScim, scimDoor } from './middleware/scim.js';
import { securityHeaders } from './middleware/security-headers.js';
import { clearSessionStates, credentialResolver, session } from './middleware/session.js';
import { deliverAfterResponse } from './middleware/webhooks.js';
import { DnsLookupError, type TxtResolver } from './platform/dns-txt-types.js';
import type { RateLimitStore } from './platform/rate-limit-store.js';
import { createRouter, notFoundAnswer } from './router.js';
import { adminRoutes } from './routes/admin.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { auditLogRoutes } from './routes/audit-logs.js';
import { authRoutes, LIBRARY_RATE_LIMITS, LIBRARY_SESSION_PATHS } from './routes/auth.js';
import { cronRoutes } from './routes/cron.js';
import { mountDocs } from './routes/docs.js';
import { healthRoutes } from './routes/health.js';
import { memberRoutes } from './routes/members.js';
import { organizationSecurityRoutes } from './routes/organization-security.js';
import { roleRoutes } from './routes/roles.js';
import { scimService } from './routes/scim-discovery.js';
import { scimGroupRoleRoutes } from './routes/scim-group-roles.js';
import { scimGroupRoutes } from './routes/scim-groups.js';
import { scimTokenRoutes } from './routes/scim-tokens.js';
import { scimUserRoutes } from './routes/scim-users.js';
import { sessionRoutes } from './routes/session.js';
import { ssoConnectionRoutes } from './routes/sso-connections.js';
import { ssoDomainRoutes } from './routes/sso-domains.js';
import { userRoutes } from './routes/users.js';
import { webhookDeliveryRoutes } from './routes/webhook-deliveries.js';
import { webhookRoutes } from './routes/webhooks.js';
import type { Clock } from './shared/clock.js';
import type { Config } from './shared/config.js';
import type { Logger } from './shared/logger.js';
import type { AppEnv } from './shared/types.js';
import { ssoSecretBox } from './sso/connection-settings.js';
import { ssoFetchPolicy } from './sso/fetch.js';
import { createSecretBox } from './webhooks/secrets.js';
import { type UrlPolicy, urlPolicyFor } from './webhooks/url-policy.js';

/** What `createApp` is built from: each entry (Node, Workers, tests) builds its own. */
export interface AppDeps {
  config: Config;
  database: DatabaseHandle;
  rateLimitStore: RateLimitStore;
  logger: Logger;
  clock?: Clock;
}

export interface CreateAppOptions {
  /** How the entry finds the client address (Node: x-forwarded-for, else the socket; Workers: CF-Connecting-IP). */
  clientIp?: RateLimitOptions['clientIp'];
  /** Replaces the configured mailer (tests capture mail with it). */
  mailer?: Mailer;
  /** Keeps a task alive after the response (Workers: `ctx.waitUntil`); Node lets it run. */
  background?: (task: Promise<unknown>) => void;
  /**
   * Session states kept between requests; the caller must have it cleared on
   * the database's notifications (`listenForSessionStateChanges`). None:
   * one statement per authenticated request (Workers).
   */
  sessionStateCache?: SessionStateCache<SessionStateRow>;
  /**
   * Sends queued webhook deliveries after a request that queued some
   * (Workers, through `background`). Node's deliverer is woken by the
   * database's notification instead.
   */
  deliverWebhooks?: () => Promise<unknown>;
  /** Every address a host name resolves to (Node): webhook URLs naming a private address are refused. */
  resolveHost?: UrlPolicy['resolve'];
  /**
   * How the service reaches identity providers (OIDC discovery, tokens and
   * keys; SAML metadata): Node pins each connection to an address the URL
   * policy allowed (docs/sso.md "Addresses"). Default: the global fetch.
   */
  ssoFetch?: typeof fetch;
  /** TXT lookups for domain verification (Node: DNS_SERVERS or the system's; Workers: DNS over TCP or HTTPS). */
  resolveTxt?: TxtResolver;
}

/**
 * The whole service: one middleware chain (request id and access log,
 * security headers, CORS, body limit, rate limit, session, deny-by-default),
 * then the route files, each of which declares its access per route.
 * Composes; holds no logic.
 */
export function createApp(deps: AppDeps, options: CreateAppOptions = {}) {
  const { config, database, rateLimitStore, logger, clock = () => new Date() } = deps;
  const db = database.db;
  // docs/sso.md "Addresses": one policy for discovery, sign-in's token and key requests alike.
  // Called as `policy.fetch(…)`: workerd refuses its fetch called with another `this`.
  const ssoFetch = options.ssoFetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  const ssoPolicy = ssoFetchPolicy(config, ssoFetch, options.resolveHost);
  // docs/security.md "Mail budgets": every mail the service sends counts against its recipient's budgets.
  const provider = options.mailer ?? createMailer({ config, logger });
  const mailer = config.rateLimit.enabled
    ? budgetedMailer(provider, { store: rateLimitStore, config, logger, background: options.background })
    : provider;
  const auth = createAuth({
    config,
    db,
    mailer,
    logger,
    background: options.background,
    clock,
    // How each library path marks the sessions it creates: declared by the library routes' rows.
    sessionPaths: LIBRARY_SESSION_PATHS,
    ssoPolicy,
  });
  const readCookieCache = createCookieCacheVerifier(config);

  const app = createRouter();
  const globals = new WeakSet<object>();
  const use = (middleware: MiddlewareHandler<AppEnv>) => {
    globals.add(middleware);
    app.use('*', middleware);
  };

  use(requestId());
  use(accessLog({ logger }));
  use(securityHeaders(config.csp));
  use(cors({ origins: config.cors.origins }));
  if (options.deliverWebhooks && options.background)
    use(deliverAfterResponse(options.deliverWebhooks, options.background));
  use(bodyLimit());
  // Cookie-bearing state changes only from the app's own origins
  // (docs/design.md "Decisions", cross-site requests): APP_URL, AUTH_URL,
  // and the ones CORS_ORIGIN names explicitly (the operator's list of
  // credentialed front ends; never `*`).
  const corsOrigins = Array.isArray(config.cors.origins) ? config.cors.origins : [];
  use(csrf({ trustedOrigins: [config.auth.appUrl, config.auth.url, ...corsOrigins] }));
  use(
    // SCIM's door counts its own tier (below).
    outsideScim(
      rateLimit({
        config: config.rateLimit,
        store: rateLimitStore,
        clientIp: options.clientIp,
        // Identity without touching the database: a flood of junk cookies is
        // limited by address before any session lookup.
        identifyUser: (c) => readCookieCache(c.req.header('cookie'))?.userId ?? null,
        // The auth tier's paths and password sign-in's: the library's from its routes' rows, and the service's own.
        tiers: rateLimitTiers(LIBRARY_RATE_LIMITS),
        clock,
      }),
    ),
  );
  // After the limiter: a refused request costs no parsing.
  use(jsonInput());
  const cache = options.sessionStateCache;
  if (cache) use(clearSessionStates({ cache }));
  // docs/scim.md: /api/scim/v2 is SCIM's router behind its own door; no request there goes further down.
  const scim = scimService({ authUrl: config.auth.url });
  scim.route('/', scimUserRoutes({ db, authUrl: config.auth.url }));
  scim.route('/', scimGroupRoutes({ db, authUrl: config.auth.url }));
  const resolveScim = createScimTokenResolver({ db, clock });
  const scimLimits = { config: config.rateLimit, store: rateLimitStore, clientIp: options.clientIp, clock };
  use(scimDoor({ service: scim, resolve: resolveScim, ...scimLimits }));
  const resolveCookie = createSessionResolver({
    auth,
    db,
    config,
    graceDays: config.accountDeletionGraceDays,
    cache,
    fromCache: readCookieCache,
    clock,
  });
  const resolveKey = config.apiKeyAuth
    ? createApiKeyResolver({ db, config, store: rateLimitStore, clock, background: options.background, cache })
    : null;
  use(session({ resolve: credentialResolver({ cookie: resolveCookie, key: resolveKey }) }));
  use(denyUndeclared(globals));

  app.route('/', healthRoutes({ db }));
  app.route('/', authRoutes({ auth, config, db, store: rateLimitStore, clock }));
  app.route('/', sessionRoutes({ auth, db, config, store: rateLimitStore, clock }));
  app.route('/', adminRoutes({ db }));
  app.route('/', memberRoutes({ db }));
  app.route('/', roleRoutes({ db }));
  const background = options.background ?? ((task: Promise<unknown>) => void task);
  const notify = (to: string, event: SecurityEvent, origin: NoticeOrigin) =>
    background(notifySecurityEvent(mailer, { to, event, origin, appUrl: config.auth.appUrl }));
  app.route('/', apiKeyRoutes({ db, clock, notify }));
  app.route('/', auditLogRoutes({ db }));
  app.route('/', organizationSecurityRoutes({ db }));
  app.route(
    '/',
    webhookRoutes({
      db,
      secrets: createSecretBox(config.auth.secret),
      urlPolicy: urlPolicyFor(config.webhooks, options.resolveHost),
      maxEndpoints: config.webhooks.maxEndpoints,
    }),
  );
  app.route('/', webhookDeliveryRoutes({ db }));
  app.route(
    '/',
    ssoConnectionRoutes({
      db,
      authUrl: config.auth.url,
      secrets: ssoSecretBox(config.auth.secret),
      policy: ssoPolicy,
    }),
  );
  // No resolver given: every check fails as a lookup that proved nothing (the entries always give one).
  const resolveTxt = options.resolveTxt ?? ((name: string) => Promise.reject(new DnsLookupError('ENOTIMP', name)));
  app.route('/', ssoDomainRoutes({ db, resolveTxt, clock }));
  app.route('/', scimTokenRoutes({ db }));
  app.route('/', scimGroupRoleRoutes({ db }));
  app.route('/', userRoutes({ db, clock, graceDays: config.accountDeletionGraceDays }));
  app.route('/', cronRoutes({ db, clock, cronSecret: config.cronSecret, graceDays: config.accountDeletionGraceDays }));

  mountDocs(app, { enabled: config.docsEnabled, serverUrl: config.auth.url });

  app.notFound(notFoundAnswer(app));
  app.onError(renderError);
  return app;
}

export type App = ReturnType<typeof createApp>;
