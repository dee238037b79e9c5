import { type Migration, type MigrationResultSet, Migrator } from 'kysely';
import { migrations } from '../../migrations/index.js';
import type { Logger } from '../shared/logger.js';
import type { DatabaseHandle, SchemalessDb } from './client.js';

/**
 * Applies every pending migration as the schema owner; throws on the first
 * failure. Says how many are pending before it starts and names each one as
 * it begins (a new database takes seconds), then the summary.
 */
export async function migrateToLatest(database: DatabaseHandle, logger?: Logger): Promise<string[]> {
  return database.withOwner(async (owner) => {
    const startedAt = Date.now();
    const pending = (await migrator(owner).getMigrations()).filter((m) => !m.executedAt).map((m) => m.name);
    if (pending.length === 0) {
      logger?.info('db.migrations_up_to_date', { total: Object.keys(migrations).length });
      return [];
    }
    logger?.info('db.migrations_pending', { count: pending.length, migrations: pending });
    const applied = report(await migrator(owner, logger).migrateToLatest(), logger);
    logger?.info('db.migrations_applied', { count: applied.length, ms: Date.now() - startedAt });
    return applied;
  });
}

/** Rolls back the newest migration (used by `db:migrate down` and the migration tests). */
export async function migrateDown(database: DatabaseHandle, logger?: Logger): Promise<string[]> {
  return database.withOwner(async (owner) => report(await migrator(owner).migrateDown(), logger));
}

/** With a logger, each migration says so as it starts (the result line follows when all are done). */
function migrator(db: SchemalessDb, logger?: Logger): Migrator {
  const announced: Record<string, Migration> = Object.fromEntries(
    Object.entries(migrations).map(([name, migration]) => [
      name,
      {
        ...migration,
        up: async (db: SchemalessDb) => {
          logger?.info('db.migration_applying', { migration: name });
          await migration.up(db);
        },
      },
    ]),
  );
  return new Migrator({ db, provider: { getMigrations: async () => (logger ? announced : migrations) } });
}

function report({ error, results = [] }: MigrationResultSet, logger?: Logger): string[] {
  for (const result of results) {
    const level = result.status === 'Error' ? 'error' : 'info';
    logger?.[level]('db.migration', {
      migration: result.migrationName,
      direction: result.direction,
      status: result.status,
    });
  }
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return results.filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
