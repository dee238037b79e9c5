import { lookup } from 'node:dns/promises';
import { serve } from '@hono/node-server';
import { createApp } from '../app.js';
import { sessionStateCacheFor } from '../auth/session.js';
import { migrateToLatest } from '../db/migrate.js';
import { createNodeTxtResolver } from '../platform/dns-txt.js';
import { createBatchedStdioSink } from '../platform/node-log-sink.js';
import { ConfigError, parseConfig } from '../shared/config.js';
import { describeError } from '../shared/errors.js';
import { createLogger } from '../shared/logger.js';
import { delivererFor } from '../webhooks/deliverer.js';
import { startDeliveryLoop } from '../webhooks/loop.js';
import { type PinnedFetch, pinnedFetch } from '../webhooks/pinned-fetch.js';
import { createRateLimitStore, logConfigWarnings, openConfiguredDatabase } from './deps.js';
import { answerClientErrors, LISTENER_OPTIONS, nodeClientIp } from './node-listener.js';

/** How long a webhook URL's host name may take to resolve (a request checking a URL waits for it). */
const RESOLVE_TIMEOUT_MS = 5_000;

/** Every address a host name resolves to (webhook URLs must not reach a private one); none in time: it does not resolve. */
const resolveHost = async (host: string) => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${host} did not resolve within ${RESOLVE_TIMEOUT_MS} ms`)),
      RESOLVE_TIMEOUT_MS,
    );
  });
  try {
    return (await Promise.race([lookup(host, { all: true }), late])).map((entry) => entry.address);
  } finally {
    clearTimeout(timer);
  }
};

/**
 * Requests to identity providers (discovery, keys: GET; tokens: POST) over
 * the webhooks' pinned transport: the connection goes to an address the
 * policy checked at connect time (docs/sso.md "Addresses"), never one a
 * second lookup answered. Redirects are not followed (node:http never does).
 */
function pinnedSsoFetch(pinned: PinnedFetch): typeof fetch {
  return async (input, init = {}) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    if (init.body instanceof URLSearchParams)
      headers['content-type'] ??= 'application/x-www-form-urlencoded;charset=UTF-8';
    const method = (init.method ?? 'GET').toUpperCase();
    const body = init.body == null ? undefined : String(init.body);
    return pinned(url, { method, headers, body, signal: init.signal ?? AbortSignal.timeout(10_000) });
  };
}

/** Node entry: the one place that reads process.env. */
async function main(): Promise<void> {
  let parsed: ReturnType<typeof parseConfig>;
  try {
    parsed = parseConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      createLogger().error('config.invalid', { problems: error.problems });
      process.exit(1);
    }
    throw error;
  }
  const { config, warnings } = parsed;
  const logger = createLogger({ level: config.logLevel, sink: createBatchedStdioSink() });
  logConfigWarnings(logger, warnings);

  const database = await openConfiguredDatabase(config, logger);
  if (config.database.migrateOnStart) await migrateToLatest(database, logger);

  const app = createApp(
    { config, database, rateLimitStore: createRateLimitStore(config), logger },
    {
      clientIp: nodeClientIp(config.rateLimit.trustedProxyHops),
      sessionStateCache: await sessionStateCacheFor(database),
      resolveHost,
      // Connect only to the addresses the SSO policy checked, unless private addresses are allowed anyway.
      ssoFetch: config.sso.allowPrivateUrls ? undefined : pinnedSsoFetch(pinnedFetch({ resolve: resolveHost })),
      resolveTxt: createNodeTxtResolver(config.dns.servers),
    },
  );
  const deliveries = await startDeliveryLoop({
    deliverer: delivererFor(config, {
      db: database.db,
      logger,
      resolve: resolveHost,
      // Connect only to the addresses the policy checked (no DNS rebinding between the check and the send).
      fetch: config.webhooks.allowPrivateUrls ? undefined : pinnedFetch({ resolve: resolveHost }),
    }),
    database,
    logger,
  });

  const server = serve(
    { fetch: app.fetch, port: config.port, hostname: config.host, serverOptions: { ...LISTENER_OPTIONS } },
    (info) => {
      logger.info('server.listening', { host: config.host, port: info.port, engine: database.kind, env: config.env });
    },
  );
  answerClientErrors(server, { csp: config.csp });

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('server.stopping', { signal });
    const force = setTimeout(() => {
      logger.error('server.stop_timeout', { afterMs: 10_000 });
      process.exit(1);
    }, 10_000);
    force.unref();
    // Stop accepting, let in-flight requests finish, then close the pool.
    server.close(async () => {
      // Deliveries already claimed are sent and recorded before the pool closes (their lease would retry them anyway).
      await deliveries.stop();
      await database.close().catch((error) => logger.error('db.close_failed', { error: describeError(error) }));
      logger.info('server.stopped', {});
      process.exit(0);
    });
    if ('closeIdleConnections' in server) {
      const http1 = server;
      http1.closeIdleConnections();
      // A keep-alive socket whose in-flight request ends after close() would
      // otherwise hold the exit for keepAliveTimeout (and past the force timeout).
      setInterval(() => http1.closeIdleConnections(), 100).unref();
    }
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error) => {
  createLogger().error('server.start_failed', { error: describeError(error) });
  process.exit(1);
});
