import type { DatabaseHandle } from '../db/client.js';
import { openDatabase } from '../db/open.js';
import { createMemoryStore, createUpstashStore, type RateLimitStore } from '../platform/rate-limit-store.js';
import type { Config, ConfigWarning } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';

/** Logs what parseConfig found worth saying (README "Configuration": the warnings). */
export function logConfigWarnings(logger: Logger, warnings: ConfigWarning[]): void {
  for (const warning of warnings) logger[warning.level](warning.event, { message: warning.message });
}

export function createRateLimitStore(config: Config): RateLimitStore {
  const { store, storeTimeoutMs } = config.rateLimit;
  return store ? createUpstashStore({ ...store, timeoutMs: storeTimeoutMs }) : createMemoryStore();
}

export function openConfiguredDatabase(config: Config, logger?: Logger): Promise<DatabaseHandle> {
  return openDatabase({
    url: config.database.url,
    migrationUrl: config.database.migrationUrl,
    poolMax: config.database.poolMax,
    logger,
  });
}
