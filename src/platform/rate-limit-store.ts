import { Ratelimit } from '@upstash/ratelimit';
import { Redis } from '@upstash/redis';
import type { Clock } from '../shared/clock.js';

export interface RateLimitTier {
  name: 'global' | 'auth' | 'account' | 'api' | 'invitations' | 'mail' | 'scim';
  limit: number;
  /** Window length in seconds. */
  window: number;
}

export interface RateLimitDecision {
  success: boolean;
  limit: number;
  remaining: number;
  /** Unix milliseconds when the window ends. */
  reset: number;
}

/**
 * Where counters live. Two implementations behave the same: fixed windows
 * aligned to the epoch (as @upstash/ratelimit's fixedWindow), one atomic
 * increment per decision, and a block marker with its own expiry.
 */
export interface RateLimitStore {
  readonly kind: 'memory' | 'upstash';
  limit(tier: RateLimitTier, identifier: string): Promise<RateLimitDecision>;
  /** Unix milliseconds until which `identifier` is blocked in `tier`, or null. */
  blockedUntil(tier: RateLimitTier, identifier: string): Promise<number | null>;
  block(tier: RateLimitTier, identifier: string, until: number): Promise<void>;
  /**
   * Gives back one unit that `limit` counted in the window ending at `reset`
   * (the decision's own reset): atomic, never below zero, and a no-op once
   * that window is over, so a refund never pays into the next window.
   */
  refund(tier: RateLimitTier, identifier: string, reset: number): Promise<void>;
}

const PREFIX = 'gatehouse:rl';

/** Decrements a window counter that still exists (one that expired stays gone: no key without a TTL is born). */
const REFUND_SCRIPT = `
local value = redis.call('GET', KEYS[1])
if value and tonumber(value) > 0 then
  return redis.call('DECR', KEYS[1])
end
return 0
`;

/** Counters in a Redis-compatible store over its REST protocol: the production store (docs/api.md "Rate limiting"). */
export function createUpstashStore(options: {
  url: string;
  token: string;
  timeoutMs: number;
  prefix?: string;
}): RateLimitStore {
  const prefix = options.prefix ?? PREFIX;
  const redis = new Redis({
    url: options.url,
    token: options.token,
    // A store that does not answer must not hold a request: each call aborts
    // after timeoutMs and the middleware applies the tier's failure rule.
    retry: false,
    signal: () => AbortSignal.timeout(options.timeoutMs),
    enableTelemetry: false,
    enableAutoPipelining: false,
  });
  const limiters = new Map<string, Ratelimit>();
  const limiterFor = (tier: RateLimitTier) => {
    const key = `${tier.name}:${tier.limit}:${tier.window}`;
    let limiter = limiters.get(key);
    if (!limiter) {
      limiter = new Ratelimit({
        redis,
        limiter: Ratelimit.fixedWindow(tier.limit, `${tier.window} s`),
        prefix: `${prefix}:${tier.name}`,
        // No in-process cache: every decision is the store's, so replicas agree.
        ephemeralCache: false,
        // Its own timeout lets requests through silently; ours throws instead.
        timeout: 0,
        analytics: false,
      });
      limiters.set(key, limiter);
    }
    return limiter;
  };
  const blockKey = (tier: RateLimitTier, identifier: string) => `${prefix}:${tier.name}:block:${identifier}`;
  // @upstash/ratelimit's fixed window counts in `<prefix>:<identifier>:<bucket>`,
  // bucket = floor(now / window); the window ending at `reset` is bucket reset/window - 1.
  // The store contract test proves the refund lands on the library's counter.
  const windowKey = (tier: RateLimitTier, identifier: string, reset: number) =>
    `${prefix}:${tier.name}:${identifier}:${Math.round(reset / (tier.window * 1000)) - 1}`;

  return {
    kind: 'upstash',
    async limit(tier, identifier) {
      const { success, limit, remaining, reset } = await limiterFor(tier).limit(identifier);
      return { success, limit, remaining, reset };
    },
    async blockedUntil(tier, identifier) {
      const value = await redis.get<number | string>(blockKey(tier, identifier));
      return value === null ? null : Number(value);
    },
    async block(tier, identifier, until) {
      // Milliseconds: a TTL rounded up to whole seconds would keep the block
      // up to a second past `until` (the in-memory store ends it at `until`).
      await redis.set(blockKey(tier, identifier), until, { px: Math.max(1, until - Date.now()) });
    },
    async refund(tier, identifier, reset) {
      await redis.eval(REFUND_SCRIPT, [windowKey(tier, identifier, reset)], []);
    },
  };
}

/**
 * Counters in this process's memory: development and tests only (the config
 * warns when it is used). Same windows and block semantics as the Upstash store.
 */
export function createMemoryStore(clock: Clock = () => new Date()): RateLimitStore {
  const windows = new Map<string, { count: number; reset: number }>();
  const blocks = new Map<string, number>();
  let lastSweep = 0;

  const sweep = (now: number) => {
    if (now - lastSweep < 10_000) return;
    lastSweep = now;
    for (const [key, entry] of windows) if (entry.reset <= now) windows.delete(key);
    for (const [key, until] of blocks) if (until <= now) blocks.delete(key);
  };

  return {
    kind: 'memory',
    async limit(tier, identifier) {
      const now = clock().getTime();
      sweep(now);
      const windowMs = tier.window * 1000;
      const bucket = Math.floor(now / windowMs);
      const key = `${tier.name}:${identifier}:${bucket}`;
      const entry = windows.get(key) ?? { count: 0, reset: (bucket + 1) * windowMs };
      entry.count += 1;
      windows.set(key, entry);
      return {
        success: entry.count <= tier.limit,
        limit: tier.limit,
        remaining: Math.max(0, tier.limit - entry.count),
        reset: entry.reset,
      };
    },
    async blockedUntil(tier, identifier) {
      const until = blocks.get(`${tier.name}:${identifier}`);
      return until !== undefined && until > clock().getTime() ? until : null;
    },
    async block(tier, identifier, until) {
      blocks.set(`${tier.name}:${identifier}`, until);
    },
    async refund(tier, identifier, reset) {
      const entry = windows.get(`${tier.name}:${identifier}:${Math.round(reset / (tier.window * 1000)) - 1}`);
      if (entry && entry.reset > clock().getTime() && entry.count > 0) entry.count -= 1;
    },
  };
}
