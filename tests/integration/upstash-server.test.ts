/**
 * Proves tests/support/upstash-server.ts speaks enough of the Upstash REST
 * protocol for @upstash/redis and @upstash/ratelimit, against a real redis.
 * Needs TEST_REDIS_URL (e.g. redis://127.0.0.1:63790; .ci/services.sh starts one).
 */
import { createHash, randomBytes } from 'node:crypto';
import { Ratelimit } from '@upstash/ratelimit';
import { Redis } from '@upstash/redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUpstashServer, stripUnsupportedShebang, type UpstashServer } from '../support/upstash-server.js';

const redisUrl = process.env.TEST_REDIS_URL;
if (!redisUrl) {
  throw new Error(
    'TEST_REDIS_URL is not set: the integration tests need a real redis ' +
      '(run `source .ci/services.sh && services_start`, or set TEST_REDIS_URL=redis://127.0.0.1:6379)',
  );
}

/** sha1 of @upstash/ratelimit's single-region fixedWindow limit script (with its shebang). */
const FIXED_WINDOW_LIMIT_SHA = 'b2efc02798c8e9b471a10f9b1d5745db89923ff3';

const prefix = `upstash-server-test:${randomBytes(6).toString('hex')}`;
let server: UpstashServer;
let redis: Redis;

async function raw(
  path: string,
  body: unknown,
  opts: { token?: string | null; base64?: boolean } = {},
): Promise<{ status: number; json: unknown }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const token = opts.token === undefined ? server.token : opts.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (opts.base64) headers['upstash-encoding'] = 'base64';
  const res = await fetch(`${server.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

beforeAll(async () => {
  server = await startUpstashServer({ redisUrl, token: randomBytes(16).toString('hex'), port: 0 });
  redis = new Redis({ url: server.url, token: server.token, enableAutoPipelining: false });
});

afterAll(async () => {
  if (server) {
    // Clean up everything this file wrote (the ratelimit keys too: they share the prefix).
    const keys = await redis.keys(`${prefix}*`).catch(() => [] as string[]);
    if (keys.length > 0) await redis.del(...keys);
    await server.close();
  }
});

describe('Upstash REST test server with @upstash/redis', () => {
  it('does set/get/incr with strings, JSON values, unicode and expiry', async () => {
    const k = `${prefix}:str`;
    expect(await redis.set(k, 'v1', { ex: 10 })).toBe('OK');
    expect(await redis.get(k)).toBe('v1');
    const ttl = await redis.ttl(k);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(10);

    expect(await redis.get(`${prefix}:missing`)).toBeNull();

    const counter = `${prefix}:counter`;
    expect(await redis.incr(counter)).toBe(1);
    expect(await redis.incr(counter)).toBe(2);
    expect(await redis.incrby(counter, 40)).toBe(42);

    const obj = { name: 'héllo ✓ 🚪', n: 1, nested: { ok: true } };
    await redis.set(`${prefix}:json`, obj);
    expect(await redis.get(`${prefix}:json`)).toEqual(obj);

    // A stored value that is literally "OK" (a bulk string, so it is base64 encoded).
    await redis.set(`${prefix}:ok`, 'OK');
    expect(await redis.get(`${prefix}:ok`)).toBe('OK');

    await redis.hset(`${prefix}:hash`, { a: '1', b: 'two' });
    expect(await redis.hgetall(`${prefix}:hash`)).toEqual({ a: 1, b: 'two' });
    expect(await redis.ping()).toBe('PONG');
  });

  it('surfaces redis errors', async () => {
    const k = `${prefix}:notanumber`;
    await redis.set(k, 'abc');
    await expect(redis.incr(k)).rejects.toThrow(/ERR value is not an integer/);
  });

  it('runs pipelines, keeping per-command errors', async () => {
    const k = `${prefix}:pipe`;
    const p = redis.pipeline();
    p.set(k, 'p1');
    p.incr(`${prefix}:pipe-counter`);
    p.get(k);
    p.get(`${prefix}:pipe-missing`);
    expect(await p.exec()).toEqual(['OK', 1, 'p1', null]);

    const withError = redis.pipeline();
    withError.incr(k); // "p1" is not a number
    withError.get(k);
    const results = await withError.exec({ keepErrors: true });
    expect(results[0]?.error).toMatch(/not an integer/);
    expect(results[1]).toEqual({ error: undefined, result: 'p1' });
  });

  it('runs MULTI/EXEC transactions', async () => {
    const k = `${prefix}:tx`;
    const tx = redis.multi();
    tx.set(k, 't1');
    tx.incr(`${prefix}:tx-counter`);
    tx.incr(`${prefix}:tx-counter`);
    tx.get(k);
    expect(await tx.exec()).toEqual(['OK', 1, 2, 't1']);

    // A command redis refuses while queueing discards the whole transaction.
    const bad = await raw('/multi-exec', [
      ['SET', `${prefix}:tx-never`, 'x'],
      ['SET', 'only-a-key'],
    ]);
    expect(bad.status).toBe(400);
    expect((bad.json as { error: string }).error).toMatch(/^EXECABORT/);
    expect(await redis.exists(`${prefix}:tx-never`)).toBe(0);
  });

  it('speaks the wire format: base64 strings, plain OK, numbers and null', async () => {
    const k = `${prefix}:wire`;
    expect(await raw('/', ['SET', k, 'wire-value', 'EX', 10], { base64: true })).toEqual({
      status: 200,
      json: { result: 'OK' },
    });
    expect(await raw('/', ['GET', k], { base64: true })).toEqual({ status: 200, json: { result: b64('wire-value') } });
    expect(await raw('/', ['GET', k])).toEqual({ status: 200, json: { result: 'wire-value' } });
    expect(await raw('/', ['PING'], { base64: true })).toEqual({ status: 200, json: { result: b64('PONG') } });
    expect(await raw('/', ['STRLEN', k], { base64: true })).toEqual({ status: 200, json: { result: 10 } });
    expect(await raw('/', ['GET', `${prefix}:nope`], { base64: true })).toEqual({
      status: 200,
      json: { result: null },
    });
    expect(await raw('/', ['EVAL', "return {1, 'two', {'three', 4}, false}", 0], { base64: true })).toEqual({
      status: 200,
      json: { result: [1, b64('two'), [b64('three'), 4], null] },
    });

    const pipe = await raw('/pipeline', [['GET', k], ['NOSUCHCOMMAND'], ['EXISTS', k]], { base64: true });
    expect(pipe.status).toBe(200);
    expect(pipe.json).toEqual([
      { result: b64('wire-value') },
      { error: expect.stringMatching(/^ERR unknown command/) },
      { result: 1 },
    ]);

    const err = await raw('/', ['NOSUCHCOMMAND']);
    expect(err.status).toBe(400);
    expect((err.json as { error: string }).error).toMatch(/^ERR unknown command/);

    expect((await raw('/', ['MULTI'])).status).toBe(400);
  });

  it('rejects a wrong or missing token', async () => {
    expect(await raw('/', ['PING'], { token: 'wrong' })).toEqual({ status: 401, json: { error: 'Unauthorized' } });
    expect(await raw('/', ['PING'], { token: null })).toEqual({ status: 401, json: { error: 'Unauthorized' } });
    expect(await raw('/pipeline', [['PING']], { token: 'wrong' })).toEqual({
      status: 401,
      json: { error: 'Unauthorized' },
    });
    const intruder = new Redis({ url: server.url, token: 'wrong', enableAutoPipelining: false, retry: false });
    await expect(intruder.get(`${prefix}:str`)).rejects.toThrow(/Unauthorized/);
  });
});

describe('Lua scripts with the `#!lua flags=allow-key-locking` shebang', () => {
  it('strips only the unsupported flag', () => {
    expect(stripUnsupportedShebang('#!lua flags=allow-key-locking\nreturn 1')).toBe('\nreturn 1');
    expect(stripUnsupportedShebang('#!lua flags=no-writes,allow-key-locking\nreturn 1')).toBe(
      '#!lua flags=no-writes\nreturn 1',
    );
    expect(stripUnsupportedShebang('#!lua flags=no-writes\nreturn 1')).toBe('#!lua flags=no-writes\nreturn 1');
    expect(stripUnsupportedShebang('return 1')).toBe('return 1');
  });

  it("answers NOSCRIPT for an unknown sha, then maps the client's sha after EVAL / SCRIPT LOAD", async () => {
    const script = `#!lua flags=allow-key-locking\nreturn ARGV[1] .. "-${randomBytes(4).toString('hex')}"`;
    const clientSha = createHash('sha1').update(script).digest('hex');

    const missing = await raw('/', ['EVALSHA', clientSha, 0, 'x']);
    expect(missing.status).toBe(400);
    expect((missing.json as { error: string }).error).toMatch(/^NOSCRIPT/);

    expect(await redis.scriptLoad(script)).toBe(clientSha);
    expect(await redis.scriptExists(clientSha)).toEqual([1]);
    expect(await redis.evalsha(clientSha, [], ['hi'])).toMatch(/^hi-/);
    expect(await redis.eval(script, [], ['yo'])).toMatch(/^yo-/);
  });
});

describe('@upstash/ratelimit against the test server', () => {
  it("fixedWindow(3, '10 s') allows exactly 3 of 5 calls and reports remaining/reset", async () => {
    const windowMs = 10_000;
    // Keep all five calls inside one fixed window.
    const intoWindow = Date.now() % windowMs;
    if (intoWindow > windowMs - 2_000) await new Promise((r) => setTimeout(r, windowMs - intoWindow + 50));

    const ratelimit = new Ratelimit({
      redis,
      limiter: Ratelimit.fixedWindow(3, '10 s'),
      prefix: `${prefix}:rl`,
      analytics: false,
      ephemeralCache: false, // every call goes to redis
      timeout: 0, // the default (5 s) fails OPEN with success: true, reason: "timeout"
    });
    const identifier = 'user-1';
    const before = Date.now();
    const results = [];
    for (let i = 0; i < 5; i++) results.push(await ratelimit.limit(identifier));

    expect(results.map((r) => r.success)).toEqual([true, true, true, false, false]);
    expect(results.map((r) => r.remaining)).toEqual([2, 1, 0, 0, 0]);
    expect(results.every((r) => r.limit === 3 && r.reason === undefined)).toBe(true);
    const expectedReset = (Math.floor(before / windowMs) + 1) * windowMs;
    for (const r of results) {
      expect(r.reset).toBe(expectedReset);
      expect(r.reset).toBeGreaterThan(before);
    }

    // The script really ran in redis: the counter key holds 5 and expires within the window.
    const counterKey = `${prefix}:rl:${identifier}:${Math.floor(before / windowMs)}`;
    expect(await redis.get(counterKey)).toBe(5);
    const pttl = await redis.pttl(counterKey);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(windowMs);

    // Another identifier has its own budget.
    expect((await ratelimit.limit('user-2')).success).toBe(true);

    // The client's EVALSHA over the original (shebang) script text is mapped now.
    expect((await raw('/', ['SCRIPT', 'EXISTS', FIXED_WINDOW_LIMIT_SHA])).json).toEqual({ result: [1] });

    expect((await ratelimit.getRemaining(identifier)).remaining).toBe(0);
    await ratelimit.resetUsedTokens(identifier);
    expect((await ratelimit.getRemaining(identifier)).remaining).toBe(3);
  });
});
