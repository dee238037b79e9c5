import type { ExecutionContext } from 'hono';
import { createApp, type App } from './app.js';
import { ConfigError, parseConfig, type Config } from './config.js';
import { openPostgres } from './db/client.js';
import { purgeExpiredAccounts } from './db/queries/accounts.js';
import { describeError } from './errors.js';
import { createLogger, type Logger } from './logger.js';
import { clientIpFromForwardedFor } from './middleware/rate-limit.js';
import { createRateLimitStore, logConfigWarnings } from './deps.js';

type Bindings = Record<string, unknown>;

interface Runtime {
  config: Config;
  logger: Logger;
  rateLimitStore: ReturnType<typeof createRateLimitStore>;
}

/**
 * Config is parsed once per isolate from the bindings (hosted: secrets are
 * held to production rules whatever NODE_ENV says). A bad configuration is
 * remembered and answered with 500 on every request, logged each time.
 */
const runtimes = new WeakMap<object, Runtime | ConfigError>();

function runtimeFor(env: Bindings): Runtime | ConfigError {
  let runtime = runtimes.get(env);
  if (!runtime) {
    try {
      const { config, warnings } = parseConfig(env, { hosted: true });
      const logger = createLogger({ level: config.logLevel });
      logConfigWarnings(logger, warnings);
      runtime = { config, logger, rateLimitStore: createRateLimitStore(config) };
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      runtime = error;
    }
    runtimes.set(env, runtime);
  }
  return runtime;
}

/**
 * A database client per request, closed through waitUntil: Workers forbid
 * I/O objects shared across requests ("Cannot perform I/O on behalf of a
 * different request").
 */
async function withRequestApp<T>(env: Bindings, ctx: ExecutionContext, fn: (app: App, runtime: Runtime) => Promise<T>): Promise<T> {
  const runtime = runtimeFor(env);
  if (runtime instanceof ConfigError) throw runtime;
  const database = await openPostgres({ url: runtime.config.database.url, poolMax: 1 });
  const app = createApp(
    { config: runtime.config, database, rateLimitStore: runtime.rateLimitStore, logger: runtime.logger },
    {
      clientIp: (c) => c.req.header('cf-connecting-ip') ?? clientIpFromForwardedFor(c.req.header('x-forwarded-for')),
      // Mails sent after the answer (a password reset's) must outlive it.
      background: (task) => ctx.waitUntil(task),
    },
  );
  try {
    return await fn(app, runtime);
  } finally {
    ctx.waitUntil(database.close());
  }
}

/** The Workers cron trigger runs the same purge as POST /api/cron/purge-accounts, without HTTP. */
async function scheduled(_controller: unknown, env: Bindings, ctx: ExecutionContext): Promise<void> {
  const runtime = runtimeFor(env);
  if (runtime instanceof ConfigError) {
    createLogger().error('config.invalid', { problems: runtime.problems });
    return;
  }
  const database = await openPostgres({ url: runtime.config.database.url, poolMax: 1 });
  const run = purgeExpiredAccounts(database.db, { now: new Date(), graceDays: runtime.config.accountDeletionGraceDays, logger: runtime.logger })
    .catch((error) => runtime.logger.error('cron.failed', { error: describeError(error) }))
    .finally(() => database.close());
  ctx.waitUntil(run);
  await run;
}

export default {
  scheduled,
  async fetch(request: Request, env: Bindings, ctx: ExecutionContext): Promise<Response> {
    try {
      return await withRequestApp(env, ctx, (app) => Promise.resolve(app.fetch(request, env, ctx)));
    } catch (error) {
      const logger = createLogger();
      if (error instanceof ConfigError) logger.error('config.invalid', { problems: error.problems });
      else logger.error('request.failed', { error: describeError(error) });
      return Response.json({ code: 'INTERNAL_ERROR', message: 'Internal server error' }, { status: 500 });
    }
  },
};
