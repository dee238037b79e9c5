/**
 * How the address-keyed tiers (global, auth) count a client (docs/api.md
 * "Rate limiting", docs/security.md "Client addresses"): an IPv6 client by its
 * RATE_LIMIT_IPV6_PREFIX (a /64 by default), an IPv4-mapped address as the
 * IPv4 address inside it. Runs on the in-memory store (`npm test`) and on the
 * Upstash store over Redis (`npm run test:integration`).
 */
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeClientIp } from '../../src/entries/node-listener.js';
import { access, guard } from '../../src/middleware/guard.js';
import { formatIpv6, parseIpv4, parseIpv6, rateLimitIdentity } from '../../src/shared/client-address.js';
import { createTestApp, type TestApp } from '../support/app.js';
import { call } from '../support/http.js';
import { expectRateLimited, nextIp } from '../support/rate-limit.js';
import { uniqueEmail } from '../support/users.js';

describe('rateLimitIdentity', () => {
  it('keeps an IPv4 address as it is', () => {
    expect(rateLimitIdentity('203.0.113.7')).toBe('203.0.113.7');
    expect(rateLimitIdentity('0.0.0.0')).toBe('0.0.0.0');
    expect(rateLimitIdentity(' 255.255.255.255 ')).toBe('255.255.255.255');
    expect(rateLimitIdentity('203.0.113.7:51234')).toBe('203.0.113.7');
  });

  it('reads an IPv4-mapped or IPv4-compatible IPv6 address, however spelled, as the IPv4 address', () => {
    for (const spelling of [
      '::ffff:203.0.113.7',
      '::FFFF:203.0.113.7',
      '::ffff:cb00:7107',
      '::FFFF:CB00:7107',
      '0:0:0:0:0:ffff:203.0.113.7',
      '0000:0000:0000:0000:0000:ffff:cb00:7107',
      '0::ffff:cb00:7107',
      '::0:ffff:203.0.113.7',
      '[::ffff:203.0.113.7]',
      '[::ffff:203.0.113.7]:443',
      '::ffff:203.0.113.7%eth0',
      '::203.0.113.7',
      '::cb00:7107',
      '0:0:0:0:0:0:203.0.113.7',
    ]) {
      expect(rateLimitIdentity(spelling), spelling).toBe('203.0.113.7');
    }
    expect(rateLimitIdentity('::ffff:127.0.0.1')).toBe('127.0.0.1');
    expect(rateLimitIdentity('::ffff:0.0.0.0')).toBe('0.0.0.0');
  });

  it('masks any other IPv6 address to its /64, written canonically with the length', () => {
    for (const spelling of [
      '2001:db8:1:2::1',
      '2001:db8:1:2:ffff:ffff:ffff:ffff',
      '2001:DB8:1:2:a:b:c:d',
      '2001:0db8:0001:0002:0000:0000:0000:0001',
      '2001:db8:1:2:0:0:0:1',
      '2001:db8:1:2::',
      '[2001:db8:1:2::99]',
      '[2001:db8:1:2::99]:8443',
      '2001:db8:1:2::1%en0',
      '2001:db8:1:2:1:2:192.0.2.1',
      ' 2001:db8:1:2::1 ',
    ]) {
      expect(rateLimitIdentity(spelling), spelling).toBe('2001:db8:1:2::/64');
    }
    expect(rateLimitIdentity('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(rateLimitIdentity('2001:db8::1')).toBe('2001:db8::/64');
    expect(rateLimitIdentity('2001:db8:0:0:1::1')).toBe('2001:db8::/64');
    expect(rateLimitIdentity('fe80::1%eth0')).toBe('fe80::/64');
    expect(rateLimitIdentity('::1')).toBe('::/64');
    expect(rateLimitIdentity('::')).toBe('::/64');
  });

  it('masks to the configured prefix', () => {
    expect(rateLimitIdentity('2001:db8:1:2:3:4:5:6', 48)).toBe('2001:db8:1::/48');
    expect(rateLimitIdentity('2001:db8:1:2:3:4:5:6', 56)).toBe('2001:db8:1::/56');
    expect(rateLimitIdentity('2001:db8:1:2ff:3:4:5:6', 56)).toBe('2001:db8:1:200::/56');
    expect(rateLimitIdentity('2001:db8:1:2:3:4:5:6', 128)).toBe('2001:db8:1:2:3:4:5:6/128');
    expect(rateLimitIdentity('2001:db8:1:2:3:4:5:6', 1)).toBe('::/1');
    expect(rateLimitIdentity('ffff::1', 1)).toBe('8000::/1');
    expect(rateLimitIdentity('2001:db8:1:2:3:4:5:6', 127)).toBe('2001:db8:1:2:3:4:5:6/127');
    expect(rateLimitIdentity('2001:db8:1:2:3:4:5:7', 127)).toBe('2001:db8:1:2:3:4:5:6/127');
    // An IPv4-mapped address is the IPv4 address whatever the prefix.
    expect(rateLimitIdentity('::ffff:203.0.113.7', 128)).toBe('203.0.113.7');
  });

  it('keys anything that is not an address as given', () => {
    for (const other of [
      'unknown',
      '',
      '203.0.113.256',
      '203.0.113',
      '01.2.3.4',
      '2001:db8::1::2',
      '2001:db8:1:2:3:4:5:6:7',
      ':2001:db8::1',
      '2001:db8::1:',
      '2001:db8::g',
      '2001:db8::12345',
      '::ffff:203.0.113.256',
      '::ffff:1.2.3.4.5',
      '1.2.3.4::',
      'example.com',
    ]) {
      expect(rateLimitIdentity(other), other).toBe(other);
    }
  });
});

describe('the address parsers', () => {
  it('parseIpv4 takes dotted quads only', () => {
    expect(parseIpv4('192.0.2.1')).toBe(0xc0000201);
    expect(parseIpv4('255.255.255.255')).toBe(0xffffffff);
    for (const bad of ['192.0.2', '192.0.2.1.1', '192.0.2.01', '0x7f.0.0.1', '192.0.2.256', ' 192.0.2.1', '']) {
      expect(parseIpv4(bad), bad).toBeNull();
    }
  });

  it('parseIpv6 reads every text form; formatIpv6 writes RFC 5952', () => {
    const cases: [string, string][] = [
      ['2001:0DB8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
      ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
      ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
      ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
      ['1:0:0:0:0:0:0:0', '1::'],
      ['0:0:0:0:0:0:0:0', '::'],
      ['::ffff:192.0.2.1', '::ffff:c000:201'],
      ['64:ff9b::192.0.2.1', '64:ff9b::c000:201'],
      ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
      ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8'],
    ];
    for (const [text, canonical] of cases) {
      const value = parseIpv6(text);
      expect(value, text).not.toBeNull();
      expect(formatIpv6(value!), text).toBe(canonical);
    }
    expect(parseIpv6('::1')).toBe(1n);
    expect(parseIpv6('ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff')).toBe((1n << 128n) - 1n);
    for (const bad of ['1:2:3:4:5:6:7:8:9', '1::2::3', ':::', '1:2:3:4:5:6:7', '::1.2.3', '::1.2.3.4:5']) {
      expect(parseIpv6(bad), bad).toBeNull();
    }
  });
});

const AUTH_LIMIT = 5;
const env = { RATE_LIMIT_ENABLED: 'true', RATE_LIMIT_GLOBAL_LIMIT: '1000', RATE_LIMIT_AUTH_TTL: '86400' };

/** A /64 of the documentation range (RFC 3849) no other run or test uses. */
function freshPrefix(): string {
  const hextet = () => Math.floor(Math.random() * 0x10000).toString(16);
  return `2001:db8:${hextet()}:${hextet()}`;
}

/** A password sign-in with a wrong password for a fresh email (no account budget is spent twice): its status. */
async function wrongSignIn(t: TestApp, ip: string): Promise<Response> {
  return call(t, '/api/auth/sign-in/email', {
    body: { email: uniqueEmail('v6'), password: 'not the password at all' },
    ip,
  });
}

describe('the auth tier counts an IPv6 client by its /64 (app.request, X-Forwarded-For behind one hop)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env });
  });
  afterAll(() => t?.close());

  it('eight addresses of one /64 share one budget; the next /64 has its own', async () => {
    const prefix = freshPrefix();
    const addresses = [
      `${prefix}::1`,
      `${prefix}:0:0:0:2`,
      `${prefix}:ffff:ffff:ffff:ffff`,
      `${prefix.toUpperCase()}:A:B:C:D`,
      `${prefix}:1234:5678:9abc:def0`,
      `[${prefix}::6]`,
      `${prefix}::7`,
      `${prefix}:8::8`,
    ];
    const statuses: number[] = [];
    for (const address of addresses.slice(0, AUTH_LIMIT)) statuses.push((await wrongSignIn(t, address)).status);
    expect(statuses).toEqual(Array(AUTH_LIMIT).fill(401));
    for (const address of addresses.slice(AUTH_LIMIT))
      await expectRateLimited(await wrongSignIn(t, address), AUTH_LIMIT);

    // The /64 next to it, and another /64 of the same /48: budgets of their own.
    const [a, b, c, d] = prefix.split(':');
    const neighbour = `${a}:${b}:${c}:${(Number.parseInt(d!, 16) ^ 1).toString(16)}`;
    expect((await wrongSignIn(t, `${neighbour}::1`)).status).toBe(401);
    expect((await wrongSignIn(t, `${freshPrefix()}::1`)).status).toBe(401);
  });

  it('an IPv4-mapped address spends the budget of the IPv4 address inside it', async () => {
    const ip = nextIp();
    const spellings = [ip, `::ffff:${ip}`, `::FFFF:${ip}`, ip, `0:0:0:0:0:ffff:${ip}`];
    const statuses: number[] = [];
    for (const spelling of spellings) statuses.push((await wrongSignIn(t, spelling)).status);
    expect(statuses).toEqual(Array(AUTH_LIMIT).fill(401));
    await expectRateLimited(await wrongSignIn(t, ip), AUTH_LIMIT);
    await expectRateLimited(await wrongSignIn(t, `::ffff:${ip}`), AUTH_LIMIT);
    expect((await wrongSignIn(t, nextIp())).status).toBe(401);
  });

  it('the global tier counts the /64 too', async () => {
    const limited = await createTestApp({ database: t.database, env: { ...env, RATE_LIMIT_GLOBAL_LIMIT: '3' } });
    try {
      const prefix = freshPrefix();
      const statuses: number[] = [];
      for (let i = 1; i <= 4; i++)
        statuses.push((await call(limited, '/api/health', { ip: `${prefix}::${i.toString(16)}` })).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      expect((await call(limited, '/api/health', { ip: `${freshPrefix()}::1` })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('RATE_LIMIT_IPV6_PREFIX=128 counts every address on its own', async () => {
    const exact = await createTestApp({ database: t.database, env: { ...env, RATE_LIMIT_IPV6_PREFIX: '128' } });
    try {
      const prefix = freshPrefix();
      for (let i = 1; i <= AUTH_LIMIT + 2; i++) expect((await wrongSignIn(exact, `${prefix}::${i}`)).status).toBe(401);
    } finally {
      await exact.close();
    }
  });

  it('RATE_LIMIT_IPV6_PREFIX=48 counts a whole /48 as one client', async () => {
    const wide = await createTestApp({ database: t.database, env: { ...env, RATE_LIMIT_IPV6_PREFIX: '48' } });
    try {
      const [a, b, c] = freshPrefix().split(':');
      const statuses: number[] = [];
      for (let i = 1; i <= AUTH_LIMIT; i++) statuses.push((await wrongSignIn(wide, `${a}:${b}:${c}:${i}::1`)).status);
      expect(statuses).toEqual(Array(AUTH_LIMIT).fill(401));
      await expectRateLimited(await wrongSignIn(wide, `${a}:${b}:${c}:ffff::1`), AUTH_LIMIT);
    } finally {
      await wide.close();
    }
  });

  it("keeps the client's own address for everything but the limiter (c.get('clientIp'))", async () => {
    const prefix = freshPrefix();
    const seen: string[] = [];
    const probe = await createTestApp({ database: t.database, env });
    try {
      probe.app.get('/api/test/client-ip', guard(access.public()), (c) => {
        seen.push(c.get('clientIp'));
        return c.json({});
      });
      await call(probe, '/api/test/client-ip', { ip: `${prefix}::42` });
      await call(probe, '/api/test/client-ip', { ip: '::ffff:203.0.113.9' });
      expect(seen).toEqual([`${prefix}::42`, '::ffff:203.0.113.9']);
    } finally {
      await probe.close();
    }
  });
});

describe('the Node entry: an IPv4 client of a dual-stack socket (::ffff:a.b.c.d) is a.b.c.d', () => {
  // A loopback address of this run's own (all of 127/8 reaches this host), so no earlier run's budget is in the store.
  const loopback = `127.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 250)}`;
  let t: TestApp;
  let server: ServerType;
  let port: number;
  beforeAll(async () => {
    t = await createTestApp({ env, clientIp: nodeClientIp(1) });
    server = await new Promise((resolve) => {
      const s = serve({ fetch: t.app.fetch, port: 0, hostname: '::' }, () => resolve(s));
    });
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    await t?.close();
  });

  /** One request over a socket bound to `loopback`; `xff` names the address through the trusted hop. */
  function overSocket(method: string, path: string, { body, xff }: { body?: unknown; xff?: string } = {}) {
    return new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path,
          method,
          localAddress: loopback,
          agent: false,
          headers: {
            'content-type': 'application/json',
            origin: 'http://localhost:3000',
            ...(xff ? { 'x-forwarded-for': xff } : {}),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  }

  const wrongOverSocket = (xff?: string) =>
    overSocket('POST', '/api/auth/sign-in/email', {
      body: { email: uniqueEmail('v6-socket'), password: 'not the password at all' },
      xff,
    });

  it('the mapped socket address and the same IPv4 address through the trusted hop spend one budget', async () => {
    const seen: string[] = [];
    t.app.get('/api/test/socket-address', guard(access.public()), (c) => {
      seen.push(c.get('clientIp'));
      return c.json({});
    });
    await overSocket('GET', '/api/test/socket-address');
    expect(seen).toEqual([`::ffff:${loopback}`]);

    const statuses: number[] = [];
    for (let i = 0; i < AUTH_LIMIT; i++) statuses.push(await wrongOverSocket(i % 2 === 0 ? undefined : loopback));
    expect(statuses).toEqual(Array(AUTH_LIMIT).fill(401));
    expect(await wrongOverSocket()).toBe(429);
    expect(await wrongOverSocket(loopback)).toBe(429);
    expect(await wrongOverSocket(nextIp())).toBe(401);
  });
});
