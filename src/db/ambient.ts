import { AsyncLocalStorage } from 'node:async_hooks';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from './database.js';

/**
 * An "ambient" transaction: work that must commit or roll back as one, but
 * runs partly inside better-auth (its HTTP handler opens no transaction for
 * organization creation, and its hooks cannot hand us its transaction).
 * `runInTransaction` opens one and makes it current for everything awaited
 * inside; the Kysely handle given to the library (`ambientAware`) sends every
 * query through the current transaction when there is one, and our own hook
 * code asks `currentTransaction()`.
 */
const storage = new AsyncLocalStorage<Transaction<Database>>();

export function currentTransaction(): Transaction<Database> | undefined {
  return storage.getStore();
}

/**
 * Runs `fn` in the transaction it is given (as part of the caller's), else in
 * the current ambient transaction, or opens one and makes it current.
 */
export async function runInTransaction<T>(
  db: Kysely<Database> | Transaction<Database>,
  fn: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  if (db.isTransaction) return fn(db as Transaction<Database>);
  const outer = storage.getStore();
  if (outer) return fn(outer);
  return db.transaction().execute((trx) => storage.run(trx, () => fn(trx)));
}

/** A handle that joins the current ambient transaction; otherwise it is `db`. */
export function ambientAware(db: Kysely<Database>): Kysely<Database> {
  return new Proxy(db, {
    get(target, property) {
      const trx = storage.getStore();
      if (trx && property === 'transaction') {
        // The library opening its own transaction inside ours joins ours.
        const builder = {
          execute: <T>(callback: (joined: Transaction<Database>) => Promise<T>) => callback(trx),
          setIsolationLevel: () => builder,
          setAccessMode: () => builder,
        };
        return () => builder;
      }
      if (trx && property === 'connection') {
        // The library's first query on a fresh instance (its schema check)
        // asks for a dedicated connection; inside a transaction, that is the transaction.
        return () => ({ execute: <T>(callback: (connection: Kysely<Database>) => Promise<T>) => callback(trx) });
      }
      const source = trx ?? target;
      const value = Reflect.get(source, property, source);
      // Bound, but keeping own properties: `db.fn` is a callable that carries
      // its helpers (`fn.count`, ...), which a bare bind() would drop.
      return typeof value === 'function' ? Object.assign(value.bind(source), value) : value;
    },
  });
}
