import { z } from 'zod';

/** The value `.env.example` ships: fine on a laptop, refused anywhere else. */
export const EXAMPLE_AUTH_SECRET = 'dev-only-insecure-secret-change-me-0123456789';
/** better-auth's own fallback secret (better-auth/dist/utils/constants: DEFAULT_SECRET). */
export const LIBRARY_DEFAULT_SECRET = 'better-auth-secret-12345678901234567890';
const INSECURE_SECRETS: readonly string[] = [EXAMPLE_AUTH_SECRET, LIBRARY_DEFAULT_SECRET];

const DEFAULT_PGLITE_URL = 'pglite://.data/db';

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
    .pipe(z.number().int().min(min, { message: `must be at least ${min}` }).max(max, { message: `must be at most ${max}` }))
    .optional()
    .transform((value) => value ?? fallback);

const httpUrl = (fallback: string) =>
  z
    .url({ protocol: /^https?$/, message: 'must be an http(s) URL' })
    .optional()
    .transform((value) => (value ?? fallback).replace(/\/+$/, ''));

const databaseUrl = z
  .string()
  .regex(/^(postgres(ql)?:\/\/.+|pglite:\/\/.+)$/, { message: 'must be postgres://… or pglite://<dir> / pglite://memory' });

/**
 * Every variable of spec §5 and API.md "Configuration names", as strings in,
 * typed values out. Empty strings count as unset (a blank line in a .env file).
 */
export const ConfigSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).optional().default('development'),
  PORT: int(4000, 1, 65535),
  /** The Node listener's address: an IP address or a host name (default: loopback outside production). */
  HOST: z
    .union([z.ipv4(), z.ipv6(), z.hostname()], { message: 'must be an IP address or a host name' })
    .optional(),
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
  /** Proxies that append to X-Forwarded-For in front of the service; 0 = the socket address. */
  TRUSTED_PROXY_HOPS: int(1, 0, 32),
  /** Spec §8 rule 6: reserved, validated, no effect. */
  RATE_LIMIT_API_TTL: int(60),
  RATE_LIMIT_API_LIMIT: int(100),
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

  GOOGLE_CLIENT_ID: z.string().optional(),
  GOOGLE_CLIENT_SECRET: z.string().optional(),
  GITHUB_CLIENT_ID: z.string().optional(),
  GITHUB_CLIENT_SECRET: z.string().optional(),

  /** Fill the spec's `{cdn_host}` and `{avatar_host}` CSP placeholders (space-separated sources). */
  CSP_CDN_HOST: z.string().regex(/^[^;,'"]*$/, { message: 'must be CSP sources without ; , or quotes' }).optional().default('https://cdn.jsdelivr.net'),
  CSP_AVATAR_HOST: z
    .string()
    .regex(/^[^;,'"]*$/, { message: 'must be CSP sources without ; , or quotes' })
    .optional()
    .default('https://lh3.googleusercontent.com https://avatars.githubusercontent.com'),
});

type RawConfig = z.output<typeof ConfigSchema>;

export type Environment = RawConfig['NODE_ENV'];

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
    /** Wrong-password sign-ins for one email, from any address (issue 14 item 6). */
    account: { ttl: number; limit: number };
    api: { ttl: number; limit: number };
    /** The client is the entry this many from the right of X-Forwarded-For; 0 = the socket address. */
    trustedProxyHops: number;
  };
  email: { apiKey: string | null; apiUrl: string | null; from: string };
  cronSecret: string | null;
  docsEnabled: boolean;
  accountDeletionGraceDays: number;
  apiKeyAuth: boolean;
  oauth: {
    google: { clientId: string; clientSecret: string } | null;
    github: { clientId: string; clientSecret: string } | null;
  };
  csp: { cdnHost: string; avatarHost: string };
}

export interface ConfigWarning {
  level: 'warn' | 'error';
  event: string;
  message: string;
}

/** Thrown when the service must not start. Names variables, never their values. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/** Empty strings are unset; only the variables the schema knows are read. */
function pickKnown(record: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of Object.keys(ConfigSchema.shape)) {
    const value = record[key];
    if (typeof value === 'string' && value.trim() !== '') out[key] = value.trim();
    else if (typeof value === 'number' || typeof value === 'boolean') out[key] = String(value);
  }
  return out;
}

function parseCorsOrigins(value: string, production: boolean): Config['cors']['origins'] {
  const entries = value
    .split(',')
    .map((entry) => entry.trim().replace(/\/+$/, '').toLowerCase())
    .filter(Boolean);
  const explicit = entries.filter((entry) => entry !== '*');
  if (!entries.includes('*')) return explicit;
  // Spec §8 CORS rule 3: outside production `*` allows every origin.
  if (!production) return '*';
  // Rule 2: in production a lone `*` disables CORS; beside explicit origins it is dropped silently.
  return explicit.length === 0 ? 'disabled' : explicit;
}

/**
 * Parses the environment once into a typed object (spec §5, API.md).
 * Throws ConfigError when the service must refuse to start; returns warnings
 * for the entry to log.
 */
export function parseConfig(
  record: Record<string, unknown>,
  options: { hosted?: boolean } = {},
): { config: Config; warnings: ConfigWarning[] } {
  const hosted = options.hosted ?? false;
  const parsed = ConfigSchema.safeParse(pickKnown(record));
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.') || 'config'}: ${issue.message}`));
  }
  const raw = parsed.data;
  const production = raw.NODE_ENV === 'production';
  const development = raw.NODE_ENV === 'development';
  // Spec §5: insecure defaults are refused in any non-development environment
  // (`test` included) and on a hosted deployment whatever NODE_ENV says.
  const strictSecrets = hosted || !development;
  const problems: string[] = [];
  const warnings: ConfigWarning[] = [];

  // Spec §5 "Session authentication": AUTH_SECRET.
  let secret = raw.AUTH_SECRET;
  if (!secret) {
    if (strictSecrets) problems.push('AUTH_SECRET: required outside development (a random string of 32+ characters)');
    secret = EXAMPLE_AUTH_SECRET;
  } else if (strictSecrets && INSECURE_SECRETS.includes(secret)) {
    problems.push(
      hosted
        ? 'AUTH_SECRET: is a known insecure default; a hosted deployment needs a random secret'
        : 'AUTH_SECRET: is a known insecure default; set a random secret outside development',
    );
  }

  if (production && !raw.DATABASE_URL) problems.push('DATABASE_URL: required in production');
  if (hosted && raw.DATABASE_URL?.startsWith('pglite://')) problems.push('DATABASE_URL: the embedded engine cannot run on Workers; use postgres://');
  const databaseUrlValue = raw.DATABASE_URL ?? DEFAULT_PGLITE_URL;

  // Spec §8 rule 3: production + rate limiting needs the distributed store.
  const hasStore = Boolean(raw.KV_REST_API_URL && raw.KV_REST_API_TOKEN);
  if (raw.KV_REST_API_URL && !raw.KV_REST_API_TOKEN) problems.push('KV_REST_API_TOKEN: required when KV_REST_API_URL is set');
  if (!raw.KV_REST_API_URL && raw.KV_REST_API_TOKEN) problems.push('KV_REST_API_URL: required when KV_REST_API_TOKEN is set');
  if ((production || hosted) && raw.RATE_LIMIT_ENABLED && !hasStore) {
    problems.push('KV_REST_API_URL, KV_REST_API_TOKEN: required in production while RATE_LIMIT_ENABLED is true');
  }

  const pairs = [
    ['GOOGLE_CLIENT_ID', 'GOOGLE_CLIENT_SECRET'],
    ['GITHUB_CLIENT_ID', 'GITHUB_CLIENT_SECRET'],
  ] as const;
  for (const [id, key] of pairs) {
    // Spec §5 Flows: a provider with only one of its two variables is silently skipped.
    if (Boolean(raw[id]) !== Boolean(raw[key])) {
      warnings.push({ level: 'warn', event: 'config.oauth_incomplete', message: `${id} and ${key} must both be set; provider disabled` });
    }
  }

  if (problems.length > 0) throw new ConfigError(problems);

  if (!raw.RATE_LIMIT_ENABLED && production) {
    warnings.push({ level: 'error', event: 'security.rate_limit_disabled', message: 'RATE_LIMIT_ENABLED=false in production: no request is rate limited' });
  }
  if (raw.RATE_LIMIT_ENABLED && !hasStore) {
    warnings.push({ level: 'warn', event: 'config.rate_limit_memory_store', message: 'KV_REST_API_URL/KV_REST_API_TOKEN unset: rate limits use an in-memory store of this process only' });
  }
  if (!raw.CRON_SECRET && !development) {
    warnings.push({ level: 'warn', event: 'config.cron_secret_missing', message: 'CRON_SECRET unset: scheduled-job endpoints refuse every caller' });
  }
  if (!raw.EMAIL_API_KEY && production) {
    warnings.push({ level: 'error', event: 'config.email_disabled', message: 'EMAIL_API_KEY unset in production: no email is delivered, so sign-up cannot complete' });
  }
  const cors = parseCorsOrigins(raw.CORS_ORIGIN, production);
  if (cors === 'disabled') {
    warnings.push({ level: 'warn', event: 'config.cors_disabled', message: 'CORS_ORIGIN=* in production disables CORS: no cross-origin browser access' });
  }

  const provider = (id: string | undefined, key: string | undefined) => (id && key ? { clientId: id, clientSecret: key } : null);

  const config: Config = {
    env: raw.NODE_ENV,
    hosted,
    port: raw.PORT,
    // Loopback while developing: a laptop's service is not the network's.
    host: raw.HOST ?? (production ? '0.0.0.0' : '127.0.0.1'),
    logLevel: raw.LOG_LEVEL,
    auth: {
      secret,
      url: raw.AUTH_URL,
      appUrl: raw.APP_URL,
      secureCookies: raw.AUTH_URL.startsWith('https://'),
    },
    cors: { origins: cors },
    database: {
      url: databaseUrlValue,
      migrationUrl: raw.DATABASE_MIGRATION_URL ?? databaseUrlValue,
      poolMax: raw.DATABASE_POOL_MAX,
      migrateOnStart: raw.MIGRATE_ON_START,
    },
    rateLimit: {
      enabled: raw.RATE_LIMIT_ENABLED,
      store: hasStore ? { url: raw.KV_REST_API_URL!, token: raw.KV_REST_API_TOKEN! } : null,
      storeTimeoutMs: raw.RATE_LIMIT_STORE_TIMEOUT_MS,
      global: { ttl: raw.RATE_LIMIT_GLOBAL_TTL, limit: raw.RATE_LIMIT_GLOBAL_LIMIT },
      auth: { ttl: raw.RATE_LIMIT_AUTH_TTL, limit: raw.RATE_LIMIT_AUTH_LIMIT, blockDuration: raw.RATE_LIMIT_AUTH_BLOCK_DURATION },
      account: { ttl: raw.RATE_LIMIT_ACCOUNT_TTL, limit: raw.RATE_LIMIT_ACCOUNT_LIMIT },
      api: { ttl: raw.RATE_LIMIT_API_TTL, limit: raw.RATE_LIMIT_API_LIMIT },
      trustedProxyHops: raw.TRUSTED_PROXY_HOPS,
    },
    email: { apiKey: raw.EMAIL_API_KEY ?? null, apiUrl: raw.EMAIL_API_URL ?? null, from: raw.EMAIL_FROM },
    cronSecret: raw.CRON_SECRET ?? null,
    docsEnabled: raw.DOCS_ENABLED ?? !production,
    accountDeletionGraceDays: raw.ACCOUNT_DELETION_GRACE_DAYS,
    apiKeyAuth: raw.API_KEY_AUTH === 'enabled',
    oauth: {
      google: provider(raw.GOOGLE_CLIENT_ID, raw.GOOGLE_CLIENT_SECRET),
      github: provider(raw.GITHUB_CLIENT_ID, raw.GITHUB_CLIENT_SECRET),
    },
    csp: { cdnHost: raw.CSP_CDN_HOST, avatarHost: raw.CSP_AVATAR_HOST },
  };
  return { config, warnings };
}
