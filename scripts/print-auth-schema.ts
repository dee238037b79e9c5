/**
 * Prints the SQL better-auth's own migrator (`getMigrations`) would run for
 * Gatehouse's better-auth options, against a throwaway in-memory PGlite.
 *
 *   npx tsx scripts/print-auth-schema.ts            # empty database: full CREATE script
 *   npx tsx scripts/print-auth-schema.ts --applied  # after migrations/0001: should print nothing to do
 *
 * Use it when upgrading better-auth or changing src/auth/schema.ts: the empty
 * run shows what the library now expects; the `--applied` run shows the drift
 * between migrations/0001 and the library (it must report nothing to create
 * or add). The output is reviewed by hand into a NEW migration; this script
 * never writes to a real database.
 */
import { PGlite } from '@electric-sql/pglite';
import { createPgConfig } from '@electric-sql/pglite/node-postgres';
import { type BetterAuthOptions, betterAuth } from 'better-auth';
import { getMigrations } from 'better-auth/db/migration';
import { magicLink, organization } from 'better-auth/plugins';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { authDatabaseAdvancedOptions, authSchemaOptions, organizationPluginSchema } from '../src/auth/schema.js';
import type { SchemalessDb } from '../src/db/client.js';

const applied = process.argv.includes('--applied');

const pglite = new PGlite();
await pglite.waitReady;
const pool = new pg.Pool({ ...createPgConfig(pglite), max: 1 });
const db: SchemalessDb = new Kysely({ dialect: new PostgresDialect({ pool }) });

const noop = async () => {};

const options = {
  baseURL: 'http://localhost:3000',
  secret: 'print-auth-schema-throwaway-secret-0123456789',
  database: { db, type: 'postgres', transaction: true },
  advanced: { database: authDatabaseAdvancedOptions },
  ...authSchemaOptions,
  emailAndPassword: { enabled: true, requireEmailVerification: true },
  emailVerification: { sendVerificationEmail: noop },
  socialProviders: {
    // Dummy credentials: only their presence matters (they use the accounts table).
    google: { clientId: 'x', clientSecret: 'x' },
    github: { clientId: 'x', clientSecret: 'x' },
  },
  plugins: [
    magicLink({ sendMagicLink: noop }),
    organization({ sendInvitationEmail: noop, schema: organizationPluginSchema }),
  ],
  telemetry: { enabled: false },
} satisfies BetterAuthOptions;

try {
  // Building the instance validates the options (plugin schemas, field names).
  const auth = betterAuth(options);
  await auth.$context;

  if (applied) {
    const { up } = await import('../migrations/0001_auth_tables.js');
    await up(db);
  }

  const migrations = await getMigrations(options);
  const summary = {
    toBeCreated: migrations.toBeCreated.map((t) => t.table),
    toBeAdded: migrations.toBeAdded.map((t) => ({ table: t.table, columns: Object.keys(t.fields) })),
    toBeAddedIndexes: migrations.toBeAddedIndexes.map((i) => `${i.table}.${i.name}`),
    unsafeChanges: migrations.unsafeChanges,
    schemaProblems: migrations.schemaProblems,
  };
  console.log(`-- getMigrations summary (${applied ? 'after migrations/0001' : 'empty database'}):`);
  console.log(
    JSON.stringify(summary, null, 2)
      .split('\n')
      .map((line) => `-- ${line}`)
      .join('\n'),
  );
  const nothingToDo = summary.toBeCreated.length + summary.toBeAdded.length + summary.toBeAddedIndexes.length === 0;
  if (nothingToDo) {
    console.log('-- nothing to create or add');
  } else {
    const compiled = await migrations.compileMigrations();
    // One column per line: kysely compiles each statement onto a single line.
    const pretty = compiled
      .split(';\n\n')
      .map((statement) =>
        statement.startsWith('create table')
          ? statement.replace(' (', ' (\n  ').replaceAll(', "', ',\n  "').replace(/\);?$/, '\n)')
          : statement.replace(/;$/, ''),
      )
      .join(';\n\n');
    console.log(`${pretty};`);
  }
  if (applied && (!nothingToDo || summary.schemaProblems.length > 0)) process.exitCode = 1;
} finally {
  await db.destroy();
  await pglite.close();
}
