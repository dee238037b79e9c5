import type { ExecutionContext } from 'hono';
import { type App, createApp } from '../app.js';
import type { DatabaseHandle } from '../db/client.js';
import { purgeExpiredAccounts } from '../db/queries/accounts.js';
import { type ConnectionScope, openRequestScopedPostgres } from '../db/request-scoped.js';
import { createWorkerTxtResolver, type TcpConnect, type TxtResolver } from '../platform/dns-txt-worker.js';
import { clientIpFromForwardedFor } from '../shared/client-address.js';
import { type Config, ConfigError, parseConfig } from '../shared/config.js';
import { describeError } from '../shared/errors.js';
import { createLogger, type Logger } from '../shared/logger.js';
import { delivererFor } from '../webhooks/deliverer.js';
import { createRateLimitStore, logConfigWarnings } from './deps.js';

type Bindings = Record<string, unknown>;

/** The Hyperdrive binding's name in wrangler.toml (`[[hyperdrive]] binding = "HYPERDRIVE"`). Not exported: workerd takes every named export of the entry for a handler. */
const HYPERDRIVE_BINDING = 'HYPERDRIVE';

interface Runtime {
  config: Config;
  logger: Logger;
  database: DatabaseHandle;
  scope: ConnectionScope;
  app: App;
  /** Sends due webhook deliveries for at most `budgetMs` (no new claim after it); never rejects. */
  deliver: (budgetMs: number) => Promise<unknown>;
}

/** wrangler.toml's webhook trigger: retries (and whatever a request's own send left) every minute. Other crons purge. */
const WEBHOOK_CRON = '* * * * *';
/** A request's sends after its answer stop claiming within waitUntil's 30 s; the cron's within its minute. */
const AFTER_RESPONSE_BUDGET_MS = 15_000;
const CRON_BUDGET_MS = 45_000;

/**
 * Hyperdrive's connection string when the binding exists (production, and
 * `wrangler dev` with its localConnectionString), else DATABASE_URL.
 */
function databaseUrlFrom(env: Bindings): unknown {
  const hyperdrive = env[HYPERDRIVE_BINDING] as { connectionString?: unknown } | undefined;
  return typeof hyperdrive?.connectionString === 'string' && hyperdrive.connectionString
    ? hyperdrive.connectionString
    : env.DATABASE_URL;
}

/**
 * TXT lookups for domain checks: DNS over TCP to DNS_SERVERS through
 * `connect()` of cloudflare:sockets, imported on first use (Node loads this
 * file in tests, and has no such module); else DNS over HTTPS.
 */
function workerTxtResolver(servers: readonly string[] | null): TxtResolver {
  if (!servers || servers.length === 0) return createWorkerTxtResolver(null);
  let resolver: Promise<TxtResolver> | undefined;
  const withSockets = async () => {
    // @ts-expect-error workerd's own module; its types (@cloudflare/workers-types) are not in the Node build.
    const { connect } = (await import('cloudflare:sockets')) as { connect: TcpConnect };
    return createWorkerTxtResolver(servers, { connect });
  };
  return async (name) => {
    resolver ??= withSockets().catch((error: unknown) => {
      resolver = undefined;
      throw error;
    });
    return (await resolver)(name);
  };
}

/**
 * Everything that holds no I/O object is built once per isolate, on its
 * first request: the configuration (hosted: secrets held to production rules
 * whatever NODE_ENV says), the router and its chain, better-auth, the
 * OpenAPI registry, the rate-limit store (HTTP to Upstash, a fetch per call).
 * The database handle is a Kysely over a driver whose connection belongs to
 * the request being served (db/request-scoped.ts): routes, the library and
 * the chain never hold a socket across requests. A bad configuration is
 * remembered and answered with 500 on every request, logged each time.
 */
const runtimes = new WeakMap<object, Runtime | ConfigError>();

function runtimeFor(env: Bindings): Runtime | ConfigError {
  let runtime = runtimes.get(env);
  if (!runtime) {
    try {
      const { config, warnings } = parseConfig({ ...env, DATABASE_URL: databaseUrlFrom(env) }, { hosted: true });
      const logger = createLogger({ level: config.logLevel });
      logConfigWarnings(logger, warnings);
      const { database, scope } = openRequestScopedPostgres({ url: config.database.url });
      // A Worker invocation has six connections open at once (the database's
      // is one): five sends, so none waits out its timeout queued for a
      // connection; two of them at most for one organization.
      const deliverer = delivererFor(config, { db: database.db, logger, concurrency: 5, perOrganization: 2 });
      const deliver = (budgetMs: number) =>
        deliverer
          .deliverDue({ budgetMs })
          .catch((error: unknown) => logger.error('webhook.round_failed', { error: describeError(error) }));
      const app = createApp(
        { config, database, rateLimitStore: createRateLimitStore(config), logger },
        {
          clientIp: (c) =>
            c.req.header('cf-connecting-ip') ??
            clientIpFromForwardedFor(c.req.header('x-forwarded-for'), config.rateLimit.trustedProxyHops),
          // Work after the answer (a password reset's mail, lastUsedAt) stays
          // in its request's lifetime: the connection closes after it.
          background: (task) => scope.keep(task),
          // Sent on the request's connection after its answer; the cron trigger sends what this does not.
          deliverWebhooks: () => deliver(AFTER_RESPONSE_BUDGET_MS),
          // Identity providers are reached with createApp's default, the global fetch (Cloudflare's egress
          // reaches no private address).
          resolveTxt: workerTxtResolver(config.dns.servers),
        },
      );
      runtime = { config, logger, database, scope, app, deliver };
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      runtime = error;
    }
    runtimes.set(env, runtime);
  }
  return runtime;
}

/**
 * The Workers cron triggers: every minute, the webhook deliveries that are
 * due (retries, and what a request's own send did not finish); otherwise
 * the same purge as POST /api/cron/purge-accounts, without HTTP.
 */
async function scheduled(
  controller: { cron?: string; scheduledTime?: number },
  env: Bindings,
  ctx: ExecutionContext,
): Promise<void> {
  const runtime = runtimeFor(env);
  if (runtime instanceof ConfigError) {
    createLogger().error('config.invalid', { problems: runtime.problems });
    return;
  }
  const job =
    controller.cron === WEBHOOK_CRON
      ? () => runtime.deliver(CRON_BUDGET_MS)
      : () =>
          purgeExpiredAccounts(runtime.database.db, {
            now: new Date(),
            graceDays: runtime.config.accountDeletionGraceDays,
            logger: runtime.logger,
          }).then(
            () => undefined,
            (error: unknown) => runtime.logger.error('cron.failed', { error: describeError(error) }),
          );
  const { result, close } = runtime.scope.run(job);
  ctx.waitUntil(close());
  await result;
}

export default {
  scheduled,
  async fetch(request: Request, env: Bindings, ctx: ExecutionContext): Promise<Response> {
    try {
      const runtime = runtimeFor(env);
      if (runtime instanceof ConfigError) throw runtime;
      const { result, close } = runtime.scope.run(() => Promise.resolve(runtime.app.fetch(request, env, ctx)));
      // The request's connection (if it opened one) ends once the answer and
      // everything kept for after it are done.
      ctx.waitUntil(close());
      return await result;
    } catch (error) {
      const logger = createLogger();
      if (error instanceof ConfigError) logger.error('config.invalid', { problems: error.problems });
      else logger.error('request.failed', { error: describeError(error) });
      return Response.json({ code: 'INTERNAL_ERROR', message: 'Internal server error' }, { status: 500 });
    }
  },
};
