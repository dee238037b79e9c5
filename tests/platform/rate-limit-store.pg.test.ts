/**
 * The RateLimitStore contract both implementations keep (fixed windows
 * aligned to the epoch, one atomic increment per decision, a block marker
 * that ends at its `until`). Runs on the in-memory store under `npm test` and
 * on the Upstash store over real Redis under `npm run test:integration`.
 */

import type { AddressInfo } from 'node:net';
import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryStore, createUpstashStore, type RateLimitTier } from '../../src/platform/rate-limit-store.js';
import { parseConfig } from '../../src/shared/config.js';
import { createTestClock, createTestStore, TEST_SECRET, type TestStore } from '../support/app.js';

const DAY: RateLimitTier = { name: 'global', limit: 3, window: 86_400 };

let idCounter = 0;
const nextId = (label = 'ip') => `${label}:store-test-${++idCounter}-${crypto.randomUUID().slice(0, 8)}`;

describe('rate-limit store contract', () => {
  let ts: TestStore;
  beforeAll(async () => {
    const { config } = parseConfig({ NODE_ENV: 'test', AUTH_SECRET: TEST_SECRET });
    ts = await createTestStore(config, () => new Date());
  });
  afterAll(() => ts?.close());

  it('counts up to the limit, then refuses; reset is the end of the epoch-aligned window', async () => {
    const id = nextId();
    const before = Date.now();
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push(await ts.store.limit(DAY, id));
    const after = Date.now();
    expect(decisions.map((d) => [d.success, d.limit, d.remaining])).toEqual([
      [true, 3, 2],
      [true, 3, 1],
      [true, 3, 0],
      [false, 3, 0],
      [false, 3, 0],
    ]);
    const windowMs = DAY.window * 1000;
    for (const { reset } of decisions) {
      expect(reset % windowMs).toBe(0);
      expect(reset).toBeGreaterThan(before);
      expect(reset).toBeLessThanOrEqual(after + windowMs);
    }
  });

  it('keeps separate counters per identifier and per tier', async () => {
    const a = nextId();
    const b = nextId();
    for (let i = 0; i < 3; i++) await ts.store.limit(DAY, a);
    expect((await ts.store.limit(DAY, a)).success).toBe(false);
    expect(await ts.store.limit(DAY, b)).toMatchObject({ success: true, remaining: 2 });
    expect(await ts.store.limit({ ...DAY, name: 'auth' }, a)).toMatchObject({ success: true, remaining: 2 });
  });

  it('is atomic: of 20 concurrent decisions on a limit of 5, exactly 5 succeed', async () => {
    const id = nextId();
    const tier: RateLimitTier = { name: 'auth', limit: 5, window: 86_400 };
    const decisions = await Promise.all(Array.from({ length: 20 }, () => ts.store.limit(tier, id)));
    const successes = decisions.filter((d) => d.success);
    expect(successes).toHaveLength(5);
    expect(successes.map((d) => d.remaining).sort()).toEqual([0, 1, 2, 3, 4]);
  });

  it('blocks one identifier in one tier until the given time', async () => {
    const auth: RateLimitTier = { name: 'auth', limit: 5, window: 60 };
    const id = nextId();
    expect(await ts.store.blockedUntil(auth, id)).toBeNull();
    const until = Date.now() + 60_000;
    await ts.store.block(auth, id, until);
    expect(await ts.store.blockedUntil(auth, id)).toBe(until);
    expect(await ts.store.blockedUntil(auth, nextId())).toBeNull();
    expect(await ts.store.blockedUntil({ ...auth, name: 'global' }, id)).toBeNull();
  });

  it('ends a block at `until`, not at the next whole second', async () => {
    const auth: RateLimitTier = { name: 'auth', limit: 5, window: 60 };
    const id = nextId();
    const until = Date.now() + 1200;
    await ts.store.block(auth, id, until);
    expect(await ts.store.blockedUntil(auth, id)).toBe(until);
    await sleep(until - Date.now() + 100);
    expect(await ts.store.blockedUntil(auth, id)).toBeNull();
  });

  it('refund gives one unit back to the window the decision counted in, never below zero', async () => {
    const tier: RateLimitTier = { name: 'account', limit: 2, window: 86_400 };
    const id = nextId('email');
    const first = await ts.store.limit(tier, id);
    const second = await ts.store.limit(tier, id);
    expect([first.remaining, second.remaining]).toEqual([1, 0]);
    await ts.store.refund(tier, id, second.reset);
    expect(await ts.store.limit(tier, id)).toMatchObject({ success: true, remaining: 0 });
    expect((await ts.store.limit(tier, id)).success).toBe(false);
    // Refunds past zero do not bank budget.
    const fresh = nextId('email');
    const decision = await ts.store.limit(tier, fresh);
    for (let i = 0; i < 4; i++) await ts.store.refund(tier, fresh, decision.reset);
    expect(await ts.store.limit(tier, fresh)).toMatchObject({ success: true, remaining: 1 });
    expect(await ts.store.limit(tier, fresh)).toMatchObject({ success: true, remaining: 0 });
    expect((await ts.store.limit(tier, fresh)).success).toBe(false);
  });

  it('refund for a window with no counter (ended or never used) creates nothing', async () => {
    const tier: RateLimitTier = { name: 'account', limit: 1, window: 86_400 };
    const id = nextId('email');
    const pastWindowEnd = Math.floor(Date.now() / 86_400_000) * 86_400_000;
    await ts.store.refund(tier, id, pastWindowEnd);
    await ts.store.refund(tier, id, pastWindowEnd + 86_400_000);
    expect(await ts.store.limit(tier, id)).toMatchObject({ success: true, remaining: 0 });
    expect((await ts.store.limit(tier, id)).success).toBe(false);
  });

  it('works for user identities too (any identifier string)', async () => {
    const id = nextId('user');
    expect(await ts.store.limit(DAY, id)).toMatchObject({ success: true, remaining: 2 });
  });
});

describe('in-memory store on a controlled clock', () => {
  it('opens a new budget when the window ends, and ends blocks at `until`', async () => {
    const start = Date.UTC(2030, 0, 1, 0, 0, 30);
    const clock = createTestClock(start);
    const store = createMemoryStore(clock);
    const tier: RateLimitTier = { name: 'global', limit: 2, window: 60 };
    const windowEnd = Date.UTC(2030, 0, 1, 0, 1, 0);
    expect(await store.limit(tier, 'ip:a')).toMatchObject({ success: true, remaining: 1, reset: windowEnd });
    expect(await store.limit(tier, 'ip:a')).toMatchObject({ success: true, remaining: 0, reset: windowEnd });
    expect(await store.limit(tier, 'ip:a')).toMatchObject({ success: false, remaining: 0, reset: windowEnd });
    clock.set(windowEnd - 1);
    expect((await store.limit(tier, 'ip:a')).success).toBe(false);
    clock.set(windowEnd);
    expect(await store.limit(tier, 'ip:a')).toMatchObject({ success: true, remaining: 1, reset: windowEnd + 60_000 });

    await store.block(tier, 'ip:a', windowEnd + 5000);
    clock.set(windowEnd + 4999);
    expect(await store.blockedUntil(tier, 'ip:a')).toBe(windowEnd + 5000);
    clock.set(windowEnd + 5000);
    expect(await store.blockedUntil(tier, 'ip:a')).toBeNull();
  });

  it('a refund that arrives after its window ended does not pay into the next one', async () => {
    const clock = createTestClock(Date.UTC(2030, 0, 1, 0, 0, 59));
    const store = createMemoryStore(clock);
    const tier: RateLimitTier = { name: 'account', limit: 1, window: 60 };
    const old = await store.limit(tier, 'email:x');
    clock.set(old.reset);
    const current = await store.limit(tier, 'email:x');
    expect(current).toMatchObject({ success: true, remaining: 0 });
    await store.refund(tier, 'email:x', old.reset);
    expect((await store.limit(tier, 'email:x')).success).toBe(false);
  });
});

describe('Upstash store that cannot answer', () => {
  const tier: RateLimitTier = { name: 'auth', limit: 5, window: 60 };

  it('rejects every call when nothing listens', async () => {
    const store = createUpstashStore({ url: 'http://127.0.0.1:1', token: 'test-token', timeoutMs: 200 });
    await expect(store.limit(tier, 'ip:x')).rejects.toThrow();
    await expect(store.blockedUntil(tier, 'ip:x')).rejects.toThrow();
    await expect(store.block(tier, 'ip:x', Date.now() + 1000)).rejects.toThrow();
    await expect(store.refund(tier, 'ip:x', Date.now() + 1000)).rejects.toThrow();
  });

  it('rejects every call after timeoutMs when the server accepts and never answers', async () => {
    const sockets = new Set<Socket>();
    const server: Server = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const store = createUpstashStore({ url: `http://127.0.0.1:${port}`, token: 'test-token', timeoutMs: 300 });
      for (const call of [
        () => store.limit(tier, 'ip:x'),
        () => store.blockedUntil(tier, 'ip:x'),
        () => store.block(tier, 'ip:x', Date.now() + 1000),
      ]) {
        const started = performance.now();
        await expect(call()).rejects.toThrow();
        const elapsed = performance.now() - started;
        expect(elapsed).toBeGreaterThanOrEqual(250);
        expect(elapsed).toBeLessThan(2000);
      }
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
