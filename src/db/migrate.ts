import { type MigrationResultSet, Migrator } from 'kysely';
import { migrations } from '../../migrations/index.js';
import type { Logger } from '../logger.js';
import type { Database, SchemalessDb } from './client.js';

/** Applies every pending migration as the schema owner; throws on the first failure. */
export async function migrateToLatest(database: Database, logger?: Logger): Promise<string[]> {
  return database.withOwner(async (owner) => {
    const result = await migrator(owner).migrateToLatest();
    return report(result, logger);
  });
}

/** Rolls back the newest migration (used by `db:migrate down` and the migration tests). */
export async function migrateDown(database: Database, logger?: Logger): Promise<string[]> {
  return database.withOwner(async (owner) => report(await migrator(owner).migrateDown(), logger));
}

function migrator(db: SchemalessDb): Migrator {
  return new Migrator({ db, provider: { getMigrations: async () => migrations } });
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
