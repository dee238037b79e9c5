import { type CreateAppOptions, createApp } from '../../src/app.js';
import { sessionStateCacheFor } from '../../src/auth/session.js';
import { createMemoryStore, createUpstashStore, type RateLimitStore } from '../../src/platform/rate-limit-store.js';
import { type Config, parseConfig } from '../../src/shared/config.js';
import { createMemoryLogger } from '../../src/shared/logger.js';
import type { Clock } from '../../src/shared/types.js';
import { openTestDatabase, type TestDatabase } from './database.js';
import { testServers } from './servers.js';
import { startUpstashServer } from './upstash-server.js';

/** A random secret per test process: `test` is held to production's secret rules (README "Configuration"). */
export const TEST_SECRET = `test-secret-${crypto.randomUUID()}`;

export interface TestClock {
  (): Date;
  set(at: Date | number): void;
  advance(ms: number): void;
}

/** A clock that stands still until told to move. */
export function createTestClock(start: Date | number = Date.now()): TestClock {
  let now = new Date(start).getTime();
  const clock = (() => new Date(now)) as TestClock;
  clock.set = (at) => {
    now = new Date(at).getTime();
  };
  clock.advance = (ms) => {
    now += ms;
  };
  return clock;
}

export interface TestStore {
  store: RateLimitStore;
  close(): Promise<void>;
}

/** The in-memory store for `npm test`; the Upstash protocol over real Redis in the integration suite. */
export async function createTestStore(config: Config, clock: Clock): Promise<TestStore> {
  const servers = testServers();
  if (!servers) return { store: createMemoryStore(clock), close: async () => {} };
  const token = crypto.randomUUID();
  const server = await startUpstashServer({ redisUrl: servers.redisUrl, token });
  const store = createUpstashStore({
    url: server.url,
    token,
    timeoutMs: config.rateLimit.storeTimeoutMs,
    prefix: `test:${crypto.randomUUID()}`,
  });
  return { store, close: () => server.close() };
}

export interface TestAppOptions extends CreateAppOptions {
  env?: Record<string, string>;
  clock?: TestClock;
  database?: TestDatabase;
  store?: RateLimitStore;
}

/** A fresh app on a fresh, migrated database: the one way tests build the service. */
export async function createTestApp(options: TestAppOptions = {}) {
  const { config } = parseConfig({
    NODE_ENV: 'test',
    AUTH_SECRET: TEST_SECRET,
    RATE_LIMIT_ENABLED: 'false',
    ...options.env,
  });
  const clock = options.clock ?? createTestClock();
  const logger = createMemoryLogger();
  const database = options.database ?? (await openTestDatabase());
  const testStore = options.store
    ? { store: options.store, close: async () => {} }
    : await createTestStore(config, clock);
  // As the Node entry runs: session states cached on the embedded engine, cleared by its notifications.
  const sessionStateCache = options.sessionStateCache ?? (await sessionStateCacheFor(database));
  const app = createApp(
    { config, database, rateLimitStore: testStore.store, logger, clock },
    { ...options, sessionStateCache },
  );
  return {
    app,
    config,
    database,
    db: database.db,
    logger,
    clock,
    store: testStore.store,
    sessionStateCache,
    async close() {
      await testStore.close();
      if (!options.database) await database.close();
    },
  };
}

export type TestApp = Awaited<ReturnType<typeof createTestApp>>;
