import { type ChildProcess, spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  type ConfigWarning,
  EXAMPLE_AUTH_SECRET,
  LIBRARY_DEFAULT_SECRET,
  parseConfig,
} from '../src/shared/config.js';
import { UUID_V4 } from './support/http.js';
import { freePort } from './support/process.js';

/** 40 random-looking characters: a secret production accepts. */
const GOOD_SECRET = 'p7Vd2QkLx9ZrT4mWn8Bc1YhF6sJ0aGeU3tKoNiR5';
const KV = { KV_REST_API_URL: 'https://kv.example.test', KV_REST_API_TOKEN: 'kv-token-value-1234' };
/** Everything production needs, so each test removes or breaks exactly one thing. */
const PRODUCTION = {
  NODE_ENV: 'production',
  AUTH_SECRET: GOOD_SECRET,
  DATABASE_URL: 'postgres://app@db.internal/gatehouse',
  ...KV,
};

/** The ConfigError parseConfig throws, or a failure if it does not throw. */
function refusal(record: Record<string, unknown>, options?: { hosted?: boolean }): ConfigError {
  try {
    parseConfig(record, options);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`parseConfig accepted ${JSON.stringify(Object.keys(record))}`);
}

const events = (warnings: ConfigWarning[]) => warnings.map((w) => w.event);

describe('parseConfig', () => {
  describe('AUTH_SECRET', () => {
    it('is required in production', () => {
      const { AUTH_SECRET: _, ...rest } = PRODUCTION;
      const error = refusal(rest);
      expect(error.message).toContain('AUTH_SECRET');
      expect(error.problems).toHaveLength(1);
    });

    it('is not required in development (a development default fills in)', () => {
      const { config } = parseConfig({ NODE_ENV: 'development' });
      expect(config.auth.secret.length).toBeGreaterThanOrEqual(32);
    });

    it('is required under NODE_ENV=test, which is not development', () => {
      expect(refusal({ NODE_ENV: 'test' }).message).toContain('AUTH_SECRET');
      for (const secret of [EXAMPLE_AUTH_SECRET, LIBRARY_DEFAULT_SECRET]) {
        expect(refusal({ NODE_ENV: 'test', AUTH_SECRET: secret }).message).toContain('AUTH_SECRET');
      }
    });

    it('needs 32+ characters in any environment, and the message never holds the value', () => {
      const short = 'zq-short-7x';
      for (const env of ['development', 'test', 'production']) {
        const error = refusal({ ...PRODUCTION, NODE_ENV: env, AUTH_SECRET: short });
        expect(error.message).toContain('AUTH_SECRET');
        expect(error.message).toMatch(/32/);
        expect(error.message).not.toContain(short);
        expect(JSON.stringify(error.problems)).not.toContain(short);
      }
      const justUnder = 'A'.repeat(31);
      expect(refusal({ NODE_ENV: 'development', AUTH_SECRET: justUnder }).message).not.toContain(justUnder);
      expect(parseConfig({ ...PRODUCTION, AUTH_SECRET: `${'Zx8'.repeat(10)}Qw` }).config.auth.secret).toHaveLength(32);
    });

    it.each([
      ['the .env.example value', EXAMPLE_AUTH_SECRET],
      ["the auth library's default", LIBRARY_DEFAULT_SECRET],
    ])('refuses %s in production without printing it', (_, secret) => {
      const error = refusal({ ...PRODUCTION, AUTH_SECRET: secret });
      expect(error.message).toContain('AUTH_SECRET');
      expect(error.message).not.toContain(secret);
    });

    it.each([
      ['the .env.example value', EXAMPLE_AUTH_SECRET],
      ["the auth library's default", LIBRARY_DEFAULT_SECRET],
    ])('accepts %s in development', (_, secret) => {
      expect(parseConfig({ NODE_ENV: 'development', AUTH_SECRET: secret }).config.auth.secret).toBe(secret);
    });

    it('on a hosted deployment refuses the insecure defaults, and a missing secret, even with NODE_ENV=development', () => {
      const hosted = { ...PRODUCTION, NODE_ENV: 'development' };
      for (const secret of [EXAMPLE_AUTH_SECRET, LIBRARY_DEFAULT_SECRET]) {
        const error = refusal({ ...hosted, AUTH_SECRET: secret }, { hosted: true });
        expect(error.problems).toEqual([expect.stringContaining('AUTH_SECRET')]);
        expect(error.message).not.toContain(secret);
      }
      const { AUTH_SECRET: _, ...noSecret } = hosted;
      expect(refusal(noSecret, { hosted: true }).problems).toEqual([expect.stringContaining('AUTH_SECRET')]);
      const { config } = parseConfig(hosted, { hosted: true });
      expect(config.hosted).toBe(true);
      expect(config.auth.secret).toBe(GOOD_SECRET);
    });

    it('on a hosted deployment refuses the embedded engine and a missing store', () => {
      expect(refusal({ ...PRODUCTION, DATABASE_URL: 'pglite://memory' }, { hosted: true }).message).toContain(
        'DATABASE_URL',
      );
      const { KV_REST_API_URL: _u, KV_REST_API_TOKEN: _t, ...noKv } = PRODUCTION;
      expect(refusal({ ...noKv, NODE_ENV: 'development' }, { hosted: true }).message).toContain('KV_REST_API_URL');
    });
  });

  describe('rate limiting and its store', () => {
    const { KV_REST_API_URL: _u, KV_REST_API_TOKEN: _t, ...noKv } = PRODUCTION;

    it('refuses production with rate limiting on (the default) and no KV_*', () => {
      for (const record of [noKv, { ...noKv, RATE_LIMIT_ENABLED: 'true' }]) {
        const error = refusal(record);
        expect(error.message).toContain('KV_REST_API_URL');
        expect(error.message).toContain('KV_REST_API_TOKEN');
      }
    });

    it('refuses half a store: URL without token or token without URL', () => {
      expect(refusal({ ...noKv, KV_REST_API_URL: KV.KV_REST_API_URL }).message).toContain('KV_REST_API_TOKEN');
      const tokenOnly = refusal({ ...noKv, KV_REST_API_TOKEN: KV.KV_REST_API_TOKEN });
      expect(tokenOnly.message).toContain('KV_REST_API_URL');
      expect(tokenOnly.message).not.toContain(KV.KV_REST_API_TOKEN);
    });

    it('RATE_LIMIT_ENABLED=false in production starts, with an error-level security.rate_limit_disabled warning', () => {
      const { config, warnings } = parseConfig({ ...noKv, RATE_LIMIT_ENABLED: 'false' });
      expect(config.rateLimit.enabled).toBe(false);
      expect(warnings).toContainEqual({
        level: 'error',
        event: 'security.rate_limit_disabled',
        message: expect.any(String),
      });
    });

    it('RATE_LIMIT_ENABLED=false outside production is silent', () => {
      const { warnings } = parseConfig({ NODE_ENV: 'development', RATE_LIMIT_ENABLED: 'false' });
      expect(events(warnings)).not.toContain('security.rate_limit_disabled');
    });

    it('warns about the in-memory store when limiting without KV_* outside production', () => {
      const { config, warnings } = parseConfig({ NODE_ENV: 'development' });
      expect(config.rateLimit.store).toBeNull();
      expect(warnings).toContainEqual({
        level: 'warn',
        event: 'config.rate_limit_memory_store',
        message: expect.any(String),
      });
    });

    it('uses the distributed store, without a warning, when KV_* are set', () => {
      const { config, warnings } = parseConfig(PRODUCTION);
      expect(config.rateLimit.store).toEqual({ url: KV.KV_REST_API_URL, token: KV.KV_REST_API_TOKEN });
      expect(events(warnings)).not.toContain('config.rate_limit_memory_store');
      expect(events(warnings)).not.toContain('security.rate_limit_disabled');
    });
  });

  describe('CRON_SECRET', () => {
    it('warns when absent outside development', () => {
      const { config, warnings } = parseConfig(PRODUCTION);
      expect(config.cronSecret).toBeNull();
      expect(warnings).toContainEqual({
        level: 'warn',
        event: 'config.cron_secret_missing',
        message: expect.any(String),
      });
    });

    it('does not warn in development, nor when set', () => {
      expect(events(parseConfig({ NODE_ENV: 'development' }).warnings)).not.toContain('config.cron_secret_missing');
      const { config, warnings } = parseConfig({ ...PRODUCTION, CRON_SECRET: 'cron-secret-of-enough-length' });
      expect(config.cronSecret).toBe('cron-secret-of-enough-length');
      expect(events(warnings)).not.toContain('config.cron_secret_missing');
    });
  });

  describe('wrong types are refused, naming the variable', () => {
    it.each([
      ['PORT', 'abc'],
      ['PORT', '0'],
      ['PORT', '65536'],
      ['PORT', '4000.5'],
      ['RATE_LIMIT_GLOBAL_LIMIT', '-1'],
      ['RATE_LIMIT_GLOBAL_LIMIT', '0'],
      ['RATE_LIMIT_AUTH_LIMIT', 'five'],
      ['RATE_LIMIT_GLOBAL_TTL', '1e3'],
      ['RATE_LIMIT_AUTH_TTL', '-60'],
      ['RATE_LIMIT_AUTH_BLOCK_DURATION', '5m'],
      ['RATE_LIMIT_API_TTL', 'x'],
      ['RATE_LIMIT_API_LIMIT', '-5'],
      ['RATE_LIMIT_ENABLED', 'maybe'],
      ['DOCS_ENABLED', 'maybe'],
      ['MIGRATE_ON_START', 'sometimes'],
      ['API_KEY_AUTH', 'on'],
      ['API_KEY_AUTH', 'true'],
      ['ACCOUNT_DELETION_GRACE_DAYS', 'thirty'],
      ['NODE_ENV', 'staging'],
      ['LOG_LEVEL', 'verbose'],
      ['AUTH_URL', 'not a url'],
      ['APP_URL', 'ftp://files.example.com'],
      ['DATABASE_URL', 'mysql://x@localhost/db'],
      ['KV_REST_API_URL', 'redis://localhost:6379'],
      ['CRON_SECRET', 'short'],
      ['CSP_CDN_HOST', 'https://cdn.example; script-src *'],
      ['TRUSTED_PROXY_HOPS', '-1'],
      ['TRUSTED_PROXY_HOPS', 'one'],
      ['TRUSTED_PROXY_HOPS', '1.5'],
      ['TRUSTED_PROXY_HOPS', '33'],
      ['RATE_LIMIT_ACCOUNT_LIMIT', '0'],
      ['RATE_LIMIT_ACCOUNT_TTL', '15m'],
      ['HOST', 'not a host'],
      ['HOST', 'http://0.0.0.0'],
      ['HOST', '0.0.0.0:4000'],
      ['HOST', 'under_score.example'],
      ['HOST', '[::1]'],
    ])('%s=%s', (name, value) => {
      const error = refusal({ NODE_ENV: 'development', [name]: value });
      expect(error.problems.some((problem) => problem.startsWith(`${name}:`))).toBe(true);
      expect(error.problems).toHaveLength(1);
    });

    it('lists every problem at once', () => {
      const error = refusal({ NODE_ENV: 'development', PORT: 'abc', DOCS_ENABLED: 'maybe', API_KEY_AUTH: 'on' });
      expect(error.problems).toHaveLength(3);
      for (const name of ['PORT', 'DOCS_ENABLED', 'API_KEY_AUTH']) expect(error.message).toContain(name);
    });

    it('never echoes a refused value', () => {
      const error = refusal({
        NODE_ENV: 'development',
        CRON_SECRET: 'cr0n-leak',
        KV_REST_API_URL: 'kv-url-leak',
        KV_REST_API_TOKEN: 'kv-tok-leak',
      });
      expect(error.message).not.toMatch(/cr0n-leak|kv-url-leak|kv-tok-leak/);
    });
  });

  describe('production at a public address fails safe', () => {
    const PUBLIC = {
      ...PRODUCTION,
      AUTH_URL: 'https://auth.example.com',
      APP_URL: 'https://app.example.com',
      TRUSTED_PROXY_HOPS: '1',
    };

    it('starts with https URLs and an explicit TRUSTED_PROXY_HOPS (0 too)', () => {
      expect(parseConfig(PUBLIC).config.auth.secureCookies).toBe(true);
      expect(parseConfig({ ...PUBLIC, TRUSTED_PROXY_HOPS: '0' }).config.rateLimit.trustedProxyHops).toBe(0);
    });

    it.each(['AUTH_URL', 'APP_URL'] as const)('refuses an http:// %s, naming it', (name) => {
      const problems = refusal({
        ...PUBLIC,
        [name]: `http://${name === 'AUTH_URL' ? 'auth' : 'app'}.example.com`,
      }).problems;
      expect(problems).toEqual([expect.stringMatching(new RegExp(`^${name}: must be https://`))]);
    });

    it('refuses a public deployment that leaves TRUSTED_PROXY_HOPS unset', () => {
      const { TRUSTED_PROXY_HOPS: _hops, ...unset } = PUBLIC;
      expect(refusal(unset).problems).toEqual([expect.stringMatching(/^TRUSTED_PROXY_HOPS: required in production/)]);
    });

    it('a production build on loopback starts (the default of one hop), warned when its URLs are http://', () => {
      const { config, warnings } = parseConfig(PRODUCTION);
      expect(config.rateLimit.trustedProxyHops).toBe(1);
      expect(warnings).toContainEqual(expect.objectContaining({ level: 'error', event: 'security.insecure_url' }));
      expect(
        parseConfig({ ...PUBLIC, AUTH_URL: 'http://127.0.0.1:4000' }).warnings.map((warning) => warning.event),
      ).toContain('security.insecure_url');
    });

    it('a hosted Worker is exempt (the client address is CF-Connecting-IP, set by Cloudflare)', () => {
      const { TRUSTED_PROXY_HOPS: _hops, ...unset } = PUBLIC;
      expect(parseConfig(unset, { hosted: true }).config.auth.url).toBe('https://auth.example.com');
    });
  });

  describe('HOST, TRUSTED_PROXY_HOPS and the account budget', () => {
    it('HOST defaults to loopback in development and test, every interface in production', () => {
      expect(parseConfig({ NODE_ENV: 'development' }).config.host).toBe('127.0.0.1');
      expect(parseConfig({}).config.host).toBe('127.0.0.1');
      expect(parseConfig({ NODE_ENV: 'test', AUTH_SECRET: GOOD_SECRET }).config.host).toBe('127.0.0.1');
      expect(parseConfig(PRODUCTION).config.host).toBe('0.0.0.0');
    });

    it.each([
      '0.0.0.0',
      '127.0.0.1',
      '10.1.2.3',
      '::',
      '::1',
      '2001:db8::7',
      'localhost',
      'api.internal',
      'gatehouse-1.svc.cluster.local',
    ])('HOST=%s is taken as given', (host) => {
      expect(parseConfig({ NODE_ENV: 'development', HOST: host }).config.host).toBe(host);
      expect(parseConfig({ ...PRODUCTION, HOST: host }).config.host).toBe(host);
    });

    it('TRUSTED_PROXY_HOPS defaults to 1 and takes 0 (the socket address)', () => {
      expect(parseConfig({ NODE_ENV: 'development' }).config.rateLimit.trustedProxyHops).toBe(1);
      expect(parseConfig(PRODUCTION).config.rateLimit.trustedProxyHops).toBe(1);
      expect(parseConfig({ NODE_ENV: 'development', TRUSTED_PROXY_HOPS: '0' }).config.rateLimit.trustedProxyHops).toBe(
        0,
      );
      expect(parseConfig({ NODE_ENV: 'development', TRUSTED_PROXY_HOPS: '3' }).config.rateLimit.trustedProxyHops).toBe(
        3,
      );
    });

    it('the account budget defaults to 10 wrong passwords per 15 minutes', () => {
      expect(parseConfig({ NODE_ENV: 'development' }).config.rateLimit.account).toEqual({ limit: 10, ttl: 900 });
      expect(
        parseConfig({ NODE_ENV: 'development', RATE_LIMIT_ACCOUNT_LIMIT: '20', RATE_LIMIT_ACCOUNT_TTL: '3600' }).config
          .rateLimit.account,
      ).toEqual({ limit: 20, ttl: 3600 });
    });
  });

  describe('multi-factor and webhooks', () => {
    it('defaults: issuer and relying party name Gatehouse, RP id the host of APP_URL, the documented retry schedule', () => {
      const { config } = parseConfig({ NODE_ENV: 'development', APP_URL: 'https://app.example.com/' });
      expect(config.mfa).toEqual({
        totpIssuer: 'Gatehouse',
        passkey: { rpId: 'app.example.com', rpName: 'Gatehouse', origin: 'https://app.example.com' },
      });
      expect(config.webhooks).toEqual({
        retrySchedule: [5, 300, 1800, 7200, 18000, 36000, 36000],
        allowPrivateUrls: true,
        httpsOnly: false,
        maxEndpoints: 20,
        allowedPorts: [443, 80],
      });
      expect(config.stepUp).toEqual({ maxAgeSeconds: 600 });
      expect(parseConfig(PRODUCTION).config.webhooks.allowedPorts).toEqual([443]);
    });

    it('RATE_LIMIT_IPV6_PREFIX (64) and the mail budgets (5 of a kind an hour, 20 a day)', () => {
      const defaults = parseConfig({ NODE_ENV: 'development' }).config;
      expect(defaults.rateLimit.ipv6Prefix).toBe(64);
      expect(defaults.email.budget).toEqual({ perHour: 5, perDay: 20 });
      const set = parseConfig({
        NODE_ENV: 'development',
        RATE_LIMIT_IPV6_PREFIX: '48',
        MAIL_BUDGET_PER_HOUR: '2',
        MAIL_BUDGET_PER_DAY: '9',
      }).config;
      expect(set.rateLimit.ipv6Prefix).toBe(48);
      expect(set.email.budget).toEqual({ perHour: 2, perDay: 9 });
      expect(refusal({ NODE_ENV: 'development', RATE_LIMIT_IPV6_PREFIX: '129' }).problems).toEqual([
        expect.stringContaining('RATE_LIMIT_IPV6_PREFIX'),
      ]);
    });

    it('WEBHOOK_MAX_ENDPOINTS, WEBHOOK_ALLOWED_PORTS (the list replaces the default) and STEP_UP_MAX_AGE', () => {
      const { config } = parseConfig({
        NODE_ENV: 'development',
        WEBHOOK_MAX_ENDPOINTS: '3',
        WEBHOOK_ALLOWED_PORTS: '8443, 443,8443',
        STEP_UP_MAX_AGE: '120',
      });
      expect(config.webhooks).toMatchObject({ maxEndpoints: 3, allowedPorts: [8443, 443] });
      expect(config.stepUp.maxAgeSeconds).toBe(120);
      for (const [name, value] of [
        ['WEBHOOK_ALLOWED_PORTS', '0'],
        ['WEBHOOK_ALLOWED_PORTS', '65536'],
        ['WEBHOOK_ALLOWED_PORTS', '443;80'],
        ['WEBHOOK_MAX_ENDPOINTS', '0'],
        ['STEP_UP_MAX_AGE', 'ten'],
      ] as const) {
        expect(refusal({ NODE_ENV: 'development', [name]: value }).problems).toEqual([expect.stringContaining(name)]);
      }
    });

    it('DNS_SERVERS: unset is the system resolver; entries become host:port / ip:port / [v6]:port (port 53 by default)', () => {
      expect(parseConfig({ NODE_ENV: 'development' }).config.dns.servers).toBeNull();
      const { config } = parseConfig({
        NODE_ENV: 'development',
        DNS_SERVERS: '127.0.0.1:5353, 1.1.1.1,[::1]:53,2606:4700:4700::1111, localhost:5353,DNS.Example.com',
      });
      expect(config.dns.servers).toEqual([
        '127.0.0.1:5353',
        '1.1.1.1:53',
        '[::1]:53',
        '[2606:4700:4700::1111]:53',
        'localhost:5353',
        'dns.example.com:53',
      ]);
      for (const value of [
        'dns_server.example.com:53',
        '-dns.example.com',
        'dns.example.com:53/x',
        '1.1.1.1:0',
        '1.1.1.1:65536',
        '256.1.1.1',
        '[1.1.1.1]:53',
        '1.1.1.1,',
      ]) {
        const problems = refusal({ NODE_ENV: 'development', DNS_SERVERS: value }).problems;
        expect(problems, value).toEqual([
          expect.stringMatching(/^DNS_SERVERS: entry \d: not host\[:port\], ip\[:port\] or \[v6\]:port$/),
        ]);
      }
      expect(refusal({ NODE_ENV: 'development', DNS_SERVERS: '9.9.9.9, ::1:x, 8.8.8.8:x' }).problems).toEqual([
        'DNS_SERVERS: entry 2, 3: not host[:port], ip[:port] or [v6]:port',
      ]);
    });

    it('production: https only, private addresses refused unless WEBHOOK_ALLOW_PRIVATE_URLS=true', () => {
      expect(parseConfig(PRODUCTION).config.webhooks).toMatchObject({ allowPrivateUrls: false, httpsOnly: true });
      expect(parseConfig({ ...PRODUCTION, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }).config.webhooks.allowPrivateUrls).toBe(
        true,
      );
      expect(parseConfig({ NODE_ENV: 'test', AUTH_SECRET: GOOD_SECRET }).config.webhooks.allowPrivateUrls).toBe(false);
    });

    it('takes explicit values', () => {
      const { config } = parseConfig({
        NODE_ENV: 'development',
        APP_URL: 'https://app.example.com',
        TOTP_ISSUER: 'Acme',
        PASSKEY_RP_ID: 'example.com',
        PASSKEY_RP_NAME: 'Acme Cloud',
        WEBHOOK_RETRY_SCHEDULE: '1, 2,3',
      });
      expect(config.mfa).toEqual({
        totpIssuer: 'Acme',
        passkey: { rpId: 'example.com', rpName: 'Acme Cloud', origin: 'https://app.example.com' },
      });
      expect(config.webhooks.retrySchedule).toEqual([1, 2, 3]);
    });

    it("refuses an RP id that is not APP_URL's host or a parent of it, and a malformed schedule", () => {
      expect(
        refusal({ NODE_ENV: 'development', APP_URL: 'https://app.example.com', PASSKEY_RP_ID: 'evil.com' }).problems,
      ).toEqual([expect.stringContaining('PASSKEY_RP_ID')]);
      expect(
        refusal({ NODE_ENV: 'development', APP_URL: 'https://app.example.com', PASSKEY_RP_ID: 'ample.com' }).problems,
      ).toEqual([expect.stringContaining('PASSKEY_RP_ID')]);
      expect(refusal({ NODE_ENV: 'development', WEBHOOK_RETRY_SCHEDULE: '5,x' }).problems).toEqual([
        expect.stringContaining('WEBHOOK_RETRY_SCHEDULE'),
      ]);
      expect(refusal({ NODE_ENV: 'development', WEBHOOK_RETRY_SCHEDULE: '0' }).problems).toEqual([
        expect.stringContaining('WEBHOOK_RETRY_SCHEDULE'),
      ]);
    });
  });

  describe('defaults (README "Configuration")', () => {
    it('outside production', () => {
      const { config } = parseConfig({ NODE_ENV: 'development' });
      expect(config.env).toBe('development');
      expect(config.port).toBe(4000);
      expect(config.rateLimit.enabled).toBe(true);
      expect(config.rateLimit.global).toEqual({ ttl: 60, limit: 60 });
      expect(config.rateLimit.auth).toEqual({ ttl: 60, limit: 5, blockDuration: 300 });
      expect(config.accountDeletionGraceDays).toBe(30);
      expect(config.database.url).toBe('pglite://.data/db');
      expect(config.database.migrateOnStart).toBe(true);
      expect(config.docsEnabled).toBe(true);
      expect(config.apiKeyAuth).toBe(false);
      expect(config.auth.url).toBe('http://localhost:4000');
      expect(config.auth.appUrl).toBe('http://localhost:3000');
      expect(config.cors.origins).toEqual(['http://localhost:3000']);
      expect(config.cronSecret).toBeNull();
      expect(config.email.apiKey).toBeNull();
      expect(config.email.from).toMatch(/@example\.com>?$/);
      expect(config.oauth).toEqual({ google: null, github: null });
    });

    it('NODE_ENV defaults to development; test also gets the embedded database', () => {
      expect(parseConfig({}).config.env).toBe('development');
      expect(parseConfig({ NODE_ENV: 'test', AUTH_SECRET: GOOD_SECRET }).config.database.url).toBe('pglite://.data/db');
    });

    it('in production', () => {
      const { config } = parseConfig(PRODUCTION);
      expect(config.port).toBe(4000);
      expect(config.docsEnabled).toBe(false);
      expect(config.apiKeyAuth).toBe(false);
      expect(config.database.url).toBe(PRODUCTION.DATABASE_URL);
      expect(config.rateLimit.global).toEqual({ ttl: 60, limit: 60 });
      expect(config.rateLimit.auth).toEqual({ ttl: 60, limit: 5, blockDuration: 300 });
    });

    it('DATABASE_URL is required in production', () => {
      const { DATABASE_URL: _, ...rest } = PRODUCTION;
      expect(refusal(rest).problems).toEqual([expect.stringContaining('DATABASE_URL')]);
    });

    it('takes explicit values', () => {
      const { config } = parseConfig({
        ...PRODUCTION,
        PORT: '8080',
        RATE_LIMIT_GLOBAL_LIMIT: '100',
        RATE_LIMIT_GLOBAL_TTL: '30',
        RATE_LIMIT_AUTH_LIMIT: '3',
        RATE_LIMIT_AUTH_TTL: '120',
        RATE_LIMIT_AUTH_BLOCK_DURATION: '0',
        DOCS_ENABLED: 'true',
        API_KEY_AUTH: 'enabled',
        ACCOUNT_DELETION_GRACE_DAYS: '7',
      });
      expect(config.port).toBe(8080);
      expect(config.rateLimit.global).toEqual({ ttl: 30, limit: 100 });
      expect(config.rateLimit.auth).toEqual({ ttl: 120, limit: 3, blockDuration: 0 });
      expect(config.docsEnabled).toBe(true);
      expect(config.apiKeyAuth).toBe(true);
      expect(config.accountDeletionGraceDays).toBe(7);
      expect(parseConfig({ NODE_ENV: 'development', DOCS_ENABLED: 'false' }).config.docsEnabled).toBe(false);
    });

    it('treats empty strings as unset (a blank line in a .env file)', () => {
      const { config } = parseConfig({
        NODE_ENV: 'development',
        PORT: '',
        AUTH_SECRET: '',
        DOCS_ENABLED: ' ',
        CORS_ORIGIN: '',
      });
      expect(config.port).toBe(4000);
      expect(config.docsEnabled).toBe(true);
      expect(config.cors.origins).toEqual(['http://localhost:3000']);
      const { AUTH_SECRET: _, ...rest } = PRODUCTION;
      expect(refusal({ ...rest, AUTH_SECRET: '   ' }).message).toContain('AUTH_SECRET');
    });
  });
});

// ---------------------------------------------------------------------------
// The real Node entry, as a subprocess.

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const START_TIMEOUT_MS = 90_000;

interface Entry {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first JSON log line whose event is `event`. */
  waitForEvent(event: string, timeoutMs: number): Promise<Record<string, unknown>>;
}

/** `node --import tsx src/entries/server.ts` with exactly `env` (plus PATH and HOME): nothing leaks in from this process. */
function startEntry(env: Record<string, string>): Entry {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/entries/server.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const lines = () =>
    `${out}\n${err}`
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitForEvent: (event, timeoutMs) =>
      new Promise((resolve, reject) => {
        const started = Date.now();
        const poll = setInterval(() => {
          const found = lines().find((line) => line.event === event);
          if (found) {
            clearInterval(poll);
            resolve(found);
          } else if (child.exitCode !== null || Date.now() - started > timeoutMs) {
            clearInterval(poll);
            reject(new Error(`no ${event} line (exit ${child.exitCode}); stdout:\n${out}\nstderr:\n${err}`));
          }
        }, 50);
      }),
  };
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} timed out`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs the entry expecting it to refuse to start. */
async function expectRefusal(env: Record<string, string>) {
  const entry = startEntry(env);
  try {
    const { code } = await withTimeout(entry.exited, START_TIMEOUT_MS, 'entry exit');
    expect(code).toBe(1);
    return entry.stdout() + entry.stderr();
  } finally {
    if (entry.child.exitCode === null) entry.child.kill('SIGKILL');
  }
}

describe('the Node entry (src/entries/server.ts)', { timeout: 180_000 }, () => {
  it('exits 1 in production without AUTH_SECRET, naming it', async () => {
    const output = await expectRefusal({
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://app@127.0.0.1:1/gatehouse',
      RATE_LIMIT_ENABLED: 'false',
      PORT: String(await freePort()),
    });
    expect(output).toContain('config.invalid');
    expect(output).toContain('AUTH_SECRET');
    expect(output).not.toContain('server.listening');
  });

  it('exits 1 in production with the insecure example secret, without printing it', async () => {
    const output = await expectRefusal({
      NODE_ENV: 'production',
      AUTH_SECRET: EXAMPLE_AUTH_SECRET,
      DATABASE_URL: 'postgres://app@127.0.0.1:1/gatehouse',
      RATE_LIMIT_ENABLED: 'false',
      PORT: String(await freePort()),
    });
    expect(output).toContain('AUTH_SECRET');
    expect(output).not.toContain(EXAMPLE_AUTH_SECRET);
    expect(output).not.toContain('server.listening');
  });

  it('exits 1 in production with rate limiting on and no KV_*, naming KV_REST_API_URL', async () => {
    const output = await expectRefusal({
      NODE_ENV: 'production',
      AUTH_SECRET: GOOD_SECRET,
      DATABASE_URL: 'postgres://app@127.0.0.1:1/gatehouse',
      PORT: String(await freePort()),
    });
    expect(output).toContain('KV_REST_API_URL');
    expect(output).not.toContain(GOOD_SECRET);
    expect(output).not.toContain('server.listening');
  });

  it('starts in development, serves /api/health with the security headers, and stops cleanly on SIGTERM with a request in flight', async () => {
    const port = await freePort();
    const entry = startEntry({ NODE_ENV: 'development', DATABASE_URL: 'pglite://memory', PORT: String(port) });
    try {
      const listening = await entry.waitForEvent('server.listening', START_TIMEOUT_MS);
      expect(listening).toMatchObject({ level: 'info', host: '127.0.0.1', port, env: 'development', engine: 'pglite' });
      // The development warnings go out as log lines too.
      await entry.waitForEvent('config.rate_limit_memory_store', 5_000);

      const health = await fetch(`http://127.0.0.1:${port}/api/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'ok' });
      // Oracle: docs/api.md "Security headers" copied on purpose (as in security-headers.test.ts); the listener must send them.
      expect(health.headers.get('content-security-policy')).toBe(
        "default-src 'none'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; " +
          "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; " +
          "img-src 'self' data: https://lh3.googleusercontent.com https://avatars.githubusercontent.com; font-src 'self'; connect-src 'self'",
      );
      expect(health.headers.get('strict-transport-security')).toBe('max-age=31536000; includeSubDomains');
      expect(health.headers.get('x-frame-options')).toBe('DENY');
      expect(health.headers.get('x-content-type-options')).toBe('nosniff');
      expect(health.headers.get('referrer-policy')).toBe('no-referrer');
      expect(health.headers.get('permissions-policy')).toBe('camera=(), microphone=(), geolocation=()');
      expect(health.headers.get('cross-origin-embedder-policy')).toBeNull();
      expect(health.headers.get('x-request-id')).toMatch(UUID_V4);

      // A request in flight: a chunked upload whose body is not finished when SIGTERM arrives.
      const inFlight = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpRequest(
          {
            host: '127.0.0.1',
            port,
            method: 'POST',
            path: '/api/in-flight-during-shutdown',
            headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
          },
          (res) => {
            let body = '';
            res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.write('{"part":');
        setTimeout(() => {
          entry.child.kill('SIGTERM');
          setTimeout(() => req.end('"two"}'), 500);
        }, 300);
      });

      const answer = await withTimeout(inFlight, 15_000, 'in-flight request');
      expect(answer.status).toBe(404);
      expect(JSON.parse(answer.body)).toMatchObject({ code: 'NOT_FOUND' });
      const answeredAt = Date.now();

      const { code, signal } = await withTimeout(entry.exited, 15_000, 'entry exit after SIGTERM');
      expect({ code, signal }).toEqual({ code: 0, signal: null });
      // The answered keep-alive connection does not hold the exit for the keep-alive timeout (5 s).
      expect(Date.now() - answeredAt).toBeLessThan(3_000);
      const output = entry.stdout() + entry.stderr();
      expect(output).toContain('"event":"server.stopping"');
      expect(output).toContain('"event":"server.stopped"');
      expect(output).not.toContain('server.stop_timeout');
      // The request was still in flight when shutdown began, and finished (and was logged) before the process stopped.
      const stoppingAt = entry.stdout().indexOf('"event":"server.stopping"');
      const loggedAt = entry.stdout().indexOf('/api/in-flight-during-shutdown');
      const stoppedAt = entry.stdout().indexOf('"event":"server.stopped"');
      expect(stoppingAt).toBeGreaterThan(-1);
      expect(loggedAt).toBeGreaterThan(stoppingAt);
      expect(stoppedAt).toBeGreaterThan(loggedAt);
    } finally {
      if (entry.child.exitCode === null) entry.child.kill('SIGKILL');
    }
  });
});
