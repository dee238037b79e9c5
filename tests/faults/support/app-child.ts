/**
 * The service as the fault tests run it: `src/entries/server.ts`'s recipe (config
 * from the environment, migrations, the configured database and rate-limit
 * store, the listener's client-error handling) in a child process of its
 * own, listening on loopback only. Prints `{"event":"child.listening","port":n}`.
 */
import { serve } from '@hono/node-server';
import { createApp } from '../../../src/app.js';
import { migrateToLatest } from '../../../src/db/migrate.js';
import { createRateLimitStore, logConfigWarnings, openConfiguredDatabase } from '../../../src/entries/deps.js';
import { answerClientErrors, LISTENER_OPTIONS } from '../../../src/entries/node-listener.js';
import { clientIpFromForwardedFor } from '../../../src/shared/client-address.js';
import { parseConfig } from '../../../src/shared/config.js';
import { createLogger } from '../../../src/shared/logger.js';

const { config, warnings } = parseConfig(process.env);
const logger = createLogger({ level: config.logLevel });
logConfigWarnings(logger, warnings);
const database = await openConfiguredDatabase(config);
await migrateToLatest(database, logger);
const app = createApp(
  { config, database, rateLimitStore: createRateLimitStore(config), logger },
  { clientIp: (c) => clientIpFromForwardedFor(c.req.header('x-forwarded-for')) ?? '127.0.0.1' },
);
const server = serve(
  { fetch: app.fetch, port: 0, hostname: '127.0.0.1', serverOptions: { ...LISTENER_OPTIONS } },
  (info) => {
    console.log(JSON.stringify({ event: 'child.listening', port: info.port }));
  },
);
answerClientErrors(server, { csp: config.csp });
process.on('SIGTERM', () => {
  server.close(() => void database.close().finally(() => process.exit(0)));
  setTimeout(() => process.exit(0), 3000).unref();
});
