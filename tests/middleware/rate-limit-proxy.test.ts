/**
 * TRUSTED_PROXY_HOPS: which address the limiter keys on.
 * The app's default reads X-Forwarded-For behind the configured hops; the
 * Node entry (nodeClientIp) falls back to the socket, and with 0 hops uses
 * nothing else.
 */
import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeClientIp } from '../../src/entries/node-listener.js';
import { clientIpFromForwardedFor } from '../../src/shared/client-address.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { CookieJar, call, expectStatus, PASSWORD } from '../support/http.js';
import { nextIp } from '../support/rate-limit.js';
import { signedUpUser } from '../support/users.js';

const LIMIT = 3;
const TTL = 86_400;
const env = (hops: string) => ({
  RATE_LIMIT_ENABLED: 'true',
  RATE_LIMIT_GLOBAL_LIMIT: String(LIMIT),
  RATE_LIMIT_GLOBAL_TTL: String(TTL),
  TRUSTED_PROXY_HOPS: hops,
  RATE_LIMIT_STORE_TIMEOUT_MS: '10000',
});

type Fetcher = (xff: string | null) => Promise<number>;

/** `LIMIT` requests pass, the next is refused: whatever varies between the calls bought nothing. */
async function expectOneBudget(fetcher: Fetcher, headers: (i: number) => string | null) {
  const statuses: number[] = [];
  for (let i = 0; i <= LIMIT + 1; i++) statuses.push(await fetcher(headers(i)));
  expect(statuses).toEqual([...Array(LIMIT).fill(200), 429, 429]);
}

describe('clientIpFromForwardedFor', () => {
  it('takes the entry `hops` from the right; 0 hops or no header is null', () => {
    const header = '10.0.0.1, 198.51.100.7, 203.0.113.9';
    expect(clientIpFromForwardedFor(header)).toBe('203.0.113.9');
    expect(clientIpFromForwardedFor(header, 1)).toBe('203.0.113.9');
    expect(clientIpFromForwardedFor(header, 2)).toBe('198.51.100.7');
    expect(clientIpFromForwardedFor(header, 3)).toBe('10.0.0.1');
    expect(clientIpFromForwardedFor(header, 0)).toBeNull();
    expect(clientIpFromForwardedFor(undefined, 2)).toBeNull();
    expect(clientIpFromForwardedFor(' , ', 2)).toBeNull();
    expect(clientIpFromForwardedFor(' 10.0.0.1 ,, 2001:db8::1 ', 1)).toBe('2001:db8::1');
  });

  it('a header shorter than the hops gives its left-most entry (every entry was appended by a proxy)', () => {
    expect(clientIpFromForwardedFor('198.51.100.7', 2)).toBe('198.51.100.7');
    expect(clientIpFromForwardedFor('198.51.100.7, 203.0.113.9', 5)).toBe('198.51.100.7');
  });
});

describe('the app keys on X-Forwarded-For behind TRUSTED_PROXY_HOPS', () => {
  let shared: TestApp;
  beforeAll(async () => {
    shared = await createTestApp();
  });
  afterAll(() => shared?.close());

  const viaApp =
    (t: TestApp): Fetcher =>
    async (xff) =>
      (await t.app.request('/api/health', { headers: xff === null ? {} : { 'x-forwarded-for': xff } })).status;

  it('defaults to one hop', () => {
    expect(shared.config.rateLimit.trustedProxyHops).toBe(1);
  });

  it('1 hop: the right-most entry; spoofed entries to its left buy nothing', async () => {
    const t = await createTestApp({ database: shared.database, env: env('1') });
    try {
      const client = nextIp();
      await expectOneBudget(viaApp(t), (i) => `10.9.9.${i}, ${client}`);
      expect(await viaApp(t)(nextIp())).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('2 hops: the second entry from the right; neither the spoofed left nor the proxy-added right entry buys anything', async () => {
    const t = await createTestApp({ database: shared.database, env: env('2') });
    try {
      const client = nextIp();
      await expectOneBudget(viaApp(t), (i) => `10.9.9.${i}, ${client}, 172.16.0.${i}`);
      // The same address seen through one proxy fewer (a shorter header): its left-most entry, the same budget.
      expect(await viaApp(t)(client)).toBe(429);
      // Another client behind the same proxies: a budget of its own.
      expect(await viaApp(t)(`10.9.9.1, ${nextIp()}, 172.16.0.1`)).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('the Node entry (nodeClientIp over a real socket)', () => {
  let shared: TestApp;
  beforeAll(async () => {
    shared = await createTestApp();
  });
  afterAll(() => shared?.close());

  async function listen(hops: number) {
    const t = await createTestApp({ database: shared.database, env: env(String(hops)), clientIp: nodeClientIp(hops) });
    const server: ServerType = await new Promise((resolve) => {
      const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    const { port } = server.address() as AddressInfo;
    const fetcher: Fetcher = async (xff) => {
      const res = await fetch(`http://127.0.0.1:${port}/api/health`, {
        headers: xff === null ? {} : { 'x-forwarded-for': xff },
      });
      await res.arrayBuffer();
      return res.status;
    };
    return {
      fetcher,
      async close() {
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await t.close();
      },
    };
  }

  it('0 hops: the socket address; X-Forwarded-For is ignored whatever it says', async () => {
    const node = await listen(0);
    try {
      await expectOneBudget(node.fetcher, (i) => (i === 0 ? null : `${nextIp()}, ${nextIp()}`));
    } finally {
      await node.close();
    }
  });

  it('1 hop without X-Forwarded-For: the socket address', async () => {
    const node = await listen(1);
    try {
      await expectOneBudget(node.fetcher, () => null);
      // A request that names an address through the trusted proxy is keyed on it instead.
      expect(await node.fetcher(nextIp())).toBe(200);
    } finally {
      await node.close();
    }
  });

  it('2 hops: the second entry from the right', async () => {
    const node = await listen(2);
    try {
      const client = nextIp();
      await expectOneBudget(node.fetcher, (i) => `10.8.8.${i}, ${client}, 172.16.1.${i}`);
      expect(await node.fetcher(`10.8.8.1, ${nextIp()}, 172.16.1.1`)).toBe(200);
    } finally {
      await node.close();
    }
  });
});

describe('the auth library records the address the service resolved', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { TRUSTED_PROXY_HOPS: '1' } });
  });
  afterAll(() => t?.close());

  it("a session's address is the entry behind the trusted hop, never the left-most one the client wrote", async () => {
    const user = await signedUpUser(t);
    const jar = new CookieJar();
    await expectStatus(
      await call(t, '/api/auth/sign-in/email', {
        body: { email: user.email, password: PASSWORD },
        jar,
        ip: '198.51.100.66, 203.0.113.9',
      }),
      200,
    );
    const sessions = await expectStatus<{ ipAddress: string | null; current: boolean }[]>(
      await call(t, '/api/auth/list-sessions', { jar, ip: '203.0.113.9' }),
      200,
    );
    expect(sessions.find((session) => session.current)?.ipAddress).toBe('203.0.113.9');
  });
});
