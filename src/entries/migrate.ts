import { migrateDown, migrateToLatest } from '../db/migrate.js';
import { type Config, ConfigError, parseConfig } from '../shared/config.js';
import { describeError } from '../shared/errors.js';
import { createLogger } from '../shared/logger.js';
import { openConfiguredDatabase } from './deps.js';

/** `npm run db:migrate` applies every pending migration; `npm run db:migrate -- down` rolls back one. */
async function main(): Promise<void> {
  const logger = createLogger();
  let config: Config;
  try {
    config = parseConfig(process.env).config;
  } catch (error) {
    if (error instanceof ConfigError) {
      logger.error('config.invalid', { problems: error.problems });
      process.exit(1);
    }
    throw error;
  }
  const database = await openConfiguredDatabase(config, logger);
  try {
    const applied =
      process.argv[2] === 'down' ? await migrateDown(database, logger) : await migrateToLatest(database, logger);
    logger.info('db.migrate_done', { applied });
  } finally {
    await database.close();
  }
}

main().catch((error) => {
  createLogger().error('db.migrate_failed', { error: describeError(error) });
  process.exit(1);
});
