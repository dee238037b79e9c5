import type { Migration } from 'kysely';

/**
 * Every migration, in order. Listed statically (not read from the file system)
 * so the same list works under Node, the test runner and a bundler.
 * Each file is frozen once merged: history is changed by adding a file.
 */
export const migrations: Record<string, Migration> = {};
