import postgres from 'postgres';

/**
 * PgBouncer's admin console (the `pgbouncer` virtual database; .ci/services.sh
 * makes the schema owner its admin). Simple protocol only, no type fetch.
 */
async function console<T>(poolerOwnerUrl: string, fn: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const url = new URL(poolerOwnerUrl);
  url.pathname = '/pgbouncer';
  const sql = postgres(url.toString(), { max: 1, fetch_types: false, prepare: false, onnotice: () => {} });
  try {
    return await fn(sql);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

/**
 * Closes the pooler's server connections to `database` (KILL), so the
 * database can be dropped; clients reconnect on their next query.
 */
export function releaseDatabase(poolerOwnerUrl: string, database: string): Promise<void> {
  const name = database.replaceAll('"', '');
  return console(poolerOwnerUrl, async (sql) => {
    await sql.unsafe(`KILL "${name}"`).simple();
    // KILL returns before the server connections are gone: wait until none is listed.
    for (let i = 0; i < 100; i++) {
      const servers = (await sql.unsafe('SHOW SERVERS').simple()) as unknown as { database: string }[];
      if (!servers.some((server) => server.database === name)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await sql.unsafe(`RESUME "${name}"`).simple();
  });
}
