/**
 * Session states (what `session_state` returns) kept between requests by one
 * process, so a request served from the library's cookie cache needs no SQL.
 *
 * Invalidation is what makes it honest: the database notifies on every
 * commit that changes what `session_state` reads (migrations/0005), and the
 * app clears it itself after any request that may have written (mayWriteSessionState), so
 * a role change, a revoked session, an organization switch or a scheduled
 * deletion is seen on the next request exactly as without the cache. A read
 * that was in flight when an invalidation came is not stored (generation).
 * Entries also end with their session and after `ttlMs`; at most
 * `maxEntries` are held (the oldest go first).
 *
 * Only where the database notifies this process before the writing commit
 * resolves: the embedded engine (auth/session.ts sessionStateCacheFor). On a
 * PostgreSQL server, and on Workers, every authenticated request reads its
 * one statement instead.
 */
export interface SessionStateCache<T> {
  /** Read before the database is asked; hand it back to `set`. */
  generation(): number;
  get(key: string): T | undefined;
  set(key: string, value: T, generation: number, expiresAtMs: number): void;
  delete(key: string): void;
  clear(): void;
  readonly size: number;
  /**
   * The entry for `key`, or `load()`'s answer, kept when it is not null,
   * `keep` agrees, and no invalidation came while it was loading.
   */
  through(
    key: string,
    expiresAtMs: number,
    load: () => Promise<T | null>,
    keep?: (value: T) => boolean,
  ): Promise<T | null>;
}

export interface SessionStateCacheOptions {
  maxEntries?: number;
  ttlMs?: number;
  now?: () => number;
}

export function createSessionStateCache<T>({
  maxEntries = 10_000,
  ttlMs = 60_000,
  now = Date.now,
}: SessionStateCacheOptions = {}): SessionStateCache<T> {
  const entries = new Map<string, { value: T; until: number }>();
  let generation = 0;
  const cache: SessionStateCache<T> = {
    generation: () => generation,
    get(key) {
      const entry = entries.get(key);
      if (!entry) return undefined;
      if (entry.until <= now()) {
        entries.delete(key);
        return undefined;
      }
      return entry.value;
    },
    set(key, value, readGeneration, expiresAtMs) {
      if (readGeneration !== generation) return;
      const until = Math.min(now() + ttlMs, expiresAtMs);
      if (until <= now()) return;
      entries.delete(key);
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
      entries.set(key, { value, until });
    },
    delete(key) {
      entries.delete(key);
    },
    clear() {
      generation += 1;
      entries.clear();
    },
    get size() {
      return entries.size;
    },
    async through(key, expiresAtMs, load, keep = () => true) {
      const cached = cache.get(key);
      if (cached !== undefined) return cached;
      const readGeneration = generation;
      const value = await load();
      if (value !== null && keep(value)) cache.set(key, value, readGeneration, expiresAtMs);
      return value;
    },
  };
  return cache;
}

/** The channel migrations/0005 notifies on. */
export const SESSION_STATE_CHANNEL = 'gatehouse_session_state';

/**
 * Whether a request of this instance may have written what the cache holds,
 * so the cache is cleared when it ends: its own writes are then seen by the
 * next request even before the database's notification arrives (on
 * PostgreSQL it comes on another connection). Reads of the service's own
 * routes never write session state; the library's GETs may (verification and
 * magic links, OAuth callbacks), except get-session, the read an SPA repeats,
 * whose only write (the daily expiry refresh) changes nothing the cache holds
 * but the expiry the cookie already carries.
 */
export function mayWriteSessionState(method: string, path: string): boolean {
  return (
    (method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS') ||
    (path.startsWith('/api/auth/') && path !== '/api/auth/get-session')
  );
}
