/** The environment's variables as strings in, typed values out; config.ts checks what they mean together. */
import { z } from 'zod';
import { dnsServers } from './dns-servers.js';

/** The value `.env.example` ships: fine on a laptop, refused anywhere else. */
export const EXAMPLE_AUTH_SECRET = 'dev-only-insecure-secret-change-me-0123456789';
/** better-auth's own fallback secret (better-auth/dist/utils/constants: DEFAULT_SECRET). */
export const LIBRARY_DEFAULT_SECRET = 'better-auth-secret-12345678901234567890';
export const INSECURE_SECRETS: readonly string[] = [EXAMPLE_AUTH_SECRET, LIBRARY_DEFAULT_SECRET];

export const DEFAULT_PGLITE_URL = 'pglite://.data/db';

const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
    .transform((value) => value === 'true' || value === '1' || value === 'yes')
    .optional()
    .transform((value) => value ?? fallback);

const int = (fallback: number, min = 1, max = 1_000_000) =>
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a whole number' })
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(min, { message: `must be at least ${min}` })
        .max(max, { message: `must be at most ${max}` }),
    )
    .optional()
    .transform((value) => value ?? fallback);

const httpUrl = (fallback: string) =>
  z
    .url({ protocol: /^https?$/, message: 'must be an http(s) URL' })
    .optional()
    .transform((value) => (value ?? fallback).replace(/\/+$/, ''));

const databaseUrl = z.string().regex(/^(postgres(ql)?:\/\/.+|pglite:\/\/.+)$/, {
  message: 'must be postgres://… or pglite://<dir> / pglite://memory',
});

/**
 * Every variable of README "Configuration", as strings in,
 * typed values out. Empty strings count as unset (a blank line in a .env file).
 */
export const ConfigSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).optional().default('development'),
  PORT: int(4000, 1, 65535),
  /** The Node listener's address: an IP address or a host name (default: loopback outside production). */
  HOST: z.union([z.ipv4(), z.ipv6(), z.hostname()], { message: 'must be an IP address or a host name' }).optional(),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).optional().default('info'),

  AUTH_SECRET: z.string().min(32, { message: 'must be at least 32 characters' }).optional(),
  AUTH_URL: httpUrl('http://localhost:4000'),
  APP_URL: httpUrl('http://localhost:3000'),
  CORS_ORIGIN: z.string().optional().default('http://localhost:3000'),

  DATABASE_URL: databaseUrl.optional(),
  /** The role that owns the schema and runs migrations; the runtime uses DATABASE_URL. */
  DATABASE_MIGRATION_URL: databaseUrl.optional(),
  DATABASE_POOL_MAX: int(10, 1, 500),
  MIGRATE_ON_START: bool(true),

  KV_REST_API_URL: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  KV_REST_API_TOKEN: z.string().optional(),
  RATE_LIMIT_ENABLED: bool(true),
  RATE_LIMIT_GLOBAL_TTL: int(60),
  RATE_LIMIT_GLOBAL_LIMIT: int(60),
  RATE_LIMIT_AUTH_TTL: int(60),
  RATE_LIMIT_AUTH_LIMIT: int(5),
  RATE_LIMIT_AUTH_BLOCK_DURATION: int(300, 0),
  /** Sign-in attempts for one email (from any address) a window may spend on wrong passwords. */
  RATE_LIMIT_ACCOUNT_LIMIT: int(10),
  RATE_LIMIT_ACCOUNT_TTL: int(900),
  /**
   * Proxies that append to X-Forwarded-For in front of the service; 0 = the
   * socket address. Left unset: one hop, and config.ts
   * refuses that in production at a public URL.
   */
  TRUSTED_PROXY_HOPS: int(1, 0, 32),
  /** An IPv6 client is keyed by this prefix of its address (one client holds at least a /64). */
  RATE_LIMIT_IPV6_PREFIX: int(64, 1, 128),
  /** Mails of one kind one address may receive per hour, and of all kinds per day. */
  MAIL_BUDGET_PER_HOUR: int(5, 1, 10_000),
  MAIL_BUDGET_PER_DAY: int(20, 1, 100_000),
  /** The tier of API-key requests (with API_KEY_AUTH=enabled), per key. */
  RATE_LIMIT_API_TTL: int(60),
  RATE_LIMIT_API_LIMIT: int(100),
  /** The tier of requests under /api/scim/v2, per SCIM token (per address without one). */
  RATE_LIMIT_SCIM_TTL: int(60),
  RATE_LIMIT_SCIM_LIMIT: int(600),
  /** How long a rate-limit decision may wait on the store before the tier's failure rule applies. */
  RATE_LIMIT_STORE_TIMEOUT_MS: int(1000, 50, 30_000),

  EMAIL_API_KEY: z.string().optional(),
  /** Resend's API base URL; tests point it at a local capture server. */
  EMAIL_API_URL: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  EMAIL_FROM: z.string().optional().default('Gatehouse <no-reply@example.com>'),

  CRON_SECRET: z.string().min(16, { message: 'must be at least 16 characters' }).optional(),
  DOCS_ENABLED: z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
    .transform((value) => value === 'true' || value === '1' || value === 'yes')
    .optional(),
  ACCOUNT_DELETION_GRACE_DAYS: int(30, 0, 3650),
  API_KEY_AUTH: z.enum(['enabled', 'disabled']).optional().default('disabled'),

  /** The issuer authenticator apps show beside a TOTP entry. */
  TOTP_ISSUER: z.string().trim().min(1).max(64).optional().default('Gatehouse'),
  /** WebAuthn relying party id: a registrable domain suffix of APP_URL's host (default: that host). */
  PASSKEY_RP_ID: z.hostname({ message: 'must be a host name' }).optional(),
  PASSKEY_RP_NAME: z.string().trim().min(1).max(64).optional().default('Gatehouse'),

  /** Seconds a proof of every factor keeps a session fresh for sensitive actions. */
  STEP_UP_MAX_AGE: int(600, 30, 86_400),

  /** Seconds between delivery attempts of one webhook delivery, comma-separated (one retry per entry). */
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .regex(/^\s*\d+\s*(,\s*\d+\s*)*$/, { message: 'must be whole seconds, comma-separated' })
    .transform((value) => value.split(',').map((entry) => Number(entry.trim())))
    .pipe(z.array(z.number().int().min(1).max(604_800, { message: 'each delay must be at most 7 days' })).max(20))
    .optional()
    .transform((value) => value ?? [5, 300, 1800, 7200, 18000, 36000, 36000]),
  /** Lets webhook URLs point at loopback and private networks (default: only in development). */
  WEBHOOK_ALLOW_PRIVATE_URLS: z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
    .transform((value) => value === 'true' || value === '1' || value === 'yes')
    .optional(),

  /** Endpoints one organization may have. */
  WEBHOOK_MAX_ENDPOINTS: int(20, 1, 1000),
  /** The ports webhook URLs may name, comma-separated (default 443, and 80 outside production). */
  WEBHOOK_ALLOWED_PORTS: z
    .string()
    .regex(/^\s*\d+\s*(,\s*\d+\s*)*$/, { message: 'must be port numbers, comma-separated' })
    .transform((value) => [...new Set(value.split(',').map((entry) => Number(entry.trim())))])
    .pipe(z.array(z.number().int().min(1).max(65535, { message: 'each port must be 1-65535' })).max(64))
    .optional(),

  /** Lets SSO issuers, discovery and metadata URLs point at loopback and private networks (default: only in development). */
  SSO_ALLOW_PRIVATE_URLS: z
    .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
    .transform((value) => value === 'true' || value === '1' || value === 'yes')
    .optional(),
  /** DNS servers for domain-ownership checks, comma-separated `host:port` (default: the system's). */
  DNS_SERVERS: dnsServers.optional(),
  GOOGLE_CLIENT_ID: z.string().optional(),
  GOOGLE_CLIENT_SECRET: z.string().optional(),
  GITHUB_CLIENT_ID: z.string().optional(),
  GITHUB_CLIENT_SECRET: z.string().optional(),

  /** Fill the `{cdn_host}` and `{avatar_host}` CSP placeholders (space-separated sources; docs/api.md "Security headers"). */
  CSP_CDN_HOST: z
    .string()
    .regex(/^[^;,'"]*$/, { message: 'must be CSP sources without ; , or quotes' })
    .optional()
    .default('https://cdn.jsdelivr.net'),
  CSP_AVATAR_HOST: z
    .string()
    .regex(/^[^;,'"]*$/, { message: 'must be CSP sources without ; , or quotes' })
    .optional()
    .default('https://lh3.googleusercontent.com https://avatars.githubusercontent.com'),
});

export type RawConfig = z.output<typeof ConfigSchema>;

export type Environment = RawConfig['NODE_ENV'];

/** The typed configuration parseConfig (config.ts) builds from ConfigSchema's output. */
export interface Config {
  env: Environment;
  /** True on Cloudflare Workers: treated as production for secrets whatever NODE_ENV says. */
  hosted: boolean;
  port: number;
  /** Where the Node entry listens. */
  host: string;
  logLevel: RawConfig['LOG_LEVEL'];
  auth: {
    secret: string;
    url: string;
    appUrl: string;
    secureCookies: boolean;
  };
  cors: { origins: string[] | '*' | 'disabled' };
  database: { url: string; migrationUrl: string; poolMax: number; migrateOnStart: boolean };
  rateLimit: {
    enabled: boolean;
    store: { url: string; token: string } | null;
    storeTimeoutMs: number;
    global: { ttl: number; limit: number };
    auth: { ttl: number; limit: number; blockDuration: number };
    /** Wrong-password sign-ins for one email, from any address (a slow guess spread over many addresses still stops). */
    account: { ttl: number; limit: number };
    api: { ttl: number; limit: number };
    /** Requests under /api/scim/v2, per token (docs/api.md "Rate limiting"). */
    scim: { ttl: number; limit: number };
    /** The client is the entry this many from the right of X-Forwarded-For; 0 = the socket address. */
    trustedProxyHops: number;
    /** IPv6 clients are keyed by this many leading bits (IPv4-mapped ones by the IPv4 address). */
    ipv6Prefix: number;
  };
  email: {
    apiKey: string | null;
    apiUrl: string | null;
    from: string;
    /** Mails one recipient may receive: per kind per hour, and of all kinds per day. */
    budget: { perHour: number; perDay: number };
  };
  cronSecret: string | null;
  docsEnabled: boolean;
  accountDeletionGraceDays: number;
  apiKeyAuth: boolean;
  oauth: {
    google: { clientId: string; clientSecret: string } | null;
    github: { clientId: string; clientSecret: string } | null;
  };
  csp: { cdnHost: string; avatarHost: string };
  mfa: {
    totpIssuer: string;
    /** WebAuthn relying party: id (a host), display name, and the one origin ceremonies must come from. */
    passkey: { rpId: string; rpName: string; origin: string };
  };
  webhooks: {
    /** Seconds to wait before each retry; after the last, the delivery is failed. */
    retrySchedule: number[];
    allowPrivateUrls: boolean;
    /** `https://` only in production. */
    httpsOnly: boolean;
    /** Endpoints one organization may have (over it: 409 QUOTA_EXCEEDED). */
    maxEndpoints: number;
    /** The ports a webhook URL may name (its scheme's default port counts as named). */
    allowedPorts: number[];
  };
  sso: {
    /** Issuers, discovery and metadata URLs may be at private, loopback and link-local addresses. */
    allowPrivateUrls: boolean;
  };
  /** Servers for domain-ownership TXT lookups, each `ip:port` or `[v6]:port`; null = the system resolver. */
  dns: { servers: string[] | null };
  /** Sensitive actions need a session that proved every factor within this many seconds. */
  stepUp: { maxAgeSeconds: number };
}
