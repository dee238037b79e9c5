import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { migrateToLatest } from '../../src/db/migrate.js';
import { openPglite } from '../../src/db/open.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A migrated PGlite data directory: each test file loads it instead of running initdb and migrations (~10 s each). */
    pgliteSnapshot: string | null;
  }
}

/**
 * Per project (vitest.config.ts): the projects on real servers (their `env`
 * sets GATEHOUSE_TEST_SERVERS) get no snapshot; the others get one. The
 * project's config is read, not process.env: vitest puts a project's `env`
 * into its test workers' environment, not into the process running this.
 */
export default async function setup(project: TestProject) {
  if (project.config.env?.GATEHOUSE_TEST_SERVERS === 'required') {
    project.provide('pgliteSnapshot', null);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-pglite-'));
  const database = await openPglite({ url: 'pglite://memory' });
  await migrateToLatest(database);
  const snapshot = join(dir, 'migrated.tar');
  await writeFile(snapshot, Buffer.from(await (await database.dumpDataDir()).arrayBuffer()));
  await database.close();
  project.provide('pgliteSnapshot', snapshot);
  return async () => {
    await rm(dir, { recursive: true, force: true });
  };
}
