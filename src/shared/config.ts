import {
  type Config,
  ConfigSchema,
  DEFAULT_PGLITE_URL,
  EXAMPLE_AUTH_SECRET,
  INSECURE_SECRETS,
} from './config-schema.js';
import { type ConfigWarning, startupWarnings } from './config-warnings.js';

export {
  type Config,
  ConfigSchema,
  type Environment,
  EXAMPLE_AUTH_SECRET,
  LIBRARY_DEFAULT_SECRET,
} from './config-schema.js';
export type { ConfigWarning } from './config-warnings.js';

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

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/** A URL whose host is this machine (nobody else reaches it at that name). */
function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname;
  return LOOPBACK_HOSTS.has(host) || host.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(host);
}

function parseCorsOrigins(value: string, production: boolean): Config['cors']['origins'] {
  const entries = value
    .split(',')
    .map((entry) => entry.trim().replace(/\/+$/, '').toLowerCase())
    .filter(Boolean);
  const explicit = entries.filter((entry) => entry !== '*');
  if (!entries.includes('*')) return explicit;
  // README "Configuration", CORS_ORIGIN: outside production `*` allows every origin.
  if (!production) return '*';
  // In production a lone `*` disables CORS; beside explicit origins it is dropped silently.
  return explicit.length === 0 ? 'disabled' : explicit;
}

/**
 * Parses the environment once into a typed object (README "Configuration").
 * Throws ConfigError when the service must refuse to start; returns warnings
 * for the entry to log.
 */
export function parseConfig(
  record: Record<string, unknown>,
  options: { hosted?: boolean } = {},
): { config: Config; warnings: ConfigWarning[] } {
  const hosted = options.hosted ?? false;
  const known = pickKnown(record);
  const parsed = ConfigSchema.safeParse(known);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.') || 'config'}: ${issue.message}`));
  }
  const raw = parsed.data;
  const production = raw.NODE_ENV === 'production';
  const development = raw.NODE_ENV === 'development';
  // Insecure defaults are refused in any non-development environment
  // (`test` included) and on a hosted deployment whatever NODE_ENV says.
  const strictSecrets = hosted || !development;
  const problems: string[] = [];
  const warnings: ConfigWarning[] = [];

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
  if (hosted && raw.DATABASE_URL?.startsWith('pglite://'))
    problems.push('DATABASE_URL: the embedded engine cannot run on Workers; use postgres://');
  const databaseUrlValue = raw.DATABASE_URL ?? DEFAULT_PGLITE_URL;

  // Production with rate limiting needs the shared store: one process's counts are not the service's.
  const hasStore = Boolean(raw.KV_REST_API_URL && raw.KV_REST_API_TOKEN);
  if (raw.KV_REST_API_URL && !raw.KV_REST_API_TOKEN)
    problems.push('KV_REST_API_TOKEN: required when KV_REST_API_URL is set');
  if (!raw.KV_REST_API_URL && raw.KV_REST_API_TOKEN)
    problems.push('KV_REST_API_URL: required when KV_REST_API_TOKEN is set');
  if ((production || hosted) && raw.RATE_LIMIT_ENABLED && !hasStore) {
    problems.push('KV_REST_API_URL, KV_REST_API_TOKEN: required in production while RATE_LIMIT_ENABLED is true');
  }

  const pairs = [
    ['GOOGLE_CLIENT_ID', 'GOOGLE_CLIENT_SECRET'],
    ['GITHUB_CLIENT_ID', 'GITHUB_CLIENT_SECRET'],
  ] as const;
  for (const [id, key] of pairs) {
    // A provider with only one of its two variables is skipped, with a warning.
    if (Boolean(raw[id]) !== Boolean(raw[key])) {
      warnings.push({
        level: 'warn',
        event: 'config.oauth_incomplete',
        message: `${id} and ${key} must both be set; provider disabled`,
      });
    }
  }

  // A production deployment reached at a public address: its cookies must be
  // Secure and its links https, and it must say how many proxies stand in
  // front of it (the rate limiter keys on the address they report). A
  // production build run on loopback (a smoke test, a TLS proxy on the same
  // host that the public never reaches past) is exempt and warned about.
  if (production && !hosted) {
    const publicUrls = (['AUTH_URL', 'APP_URL'] as const).filter((name) => !isLoopbackUrl(raw[name]));
    for (const name of publicUrls) {
      if (raw[name].startsWith('http://'))
        problems.push(`${name}: must be https:// in production (cookies would not be Secure)`);
    }
    if (publicUrls.length > 0 && !('TRUSTED_PROXY_HOPS' in known))
      problems.push(
        'TRUSTED_PROXY_HOPS: required in production: 1 behind one load balancer or Cloudflare in front of Node, 0 when clients connect directly',
      );
    if (publicUrls.length < 2 && [raw.AUTH_URL, raw.APP_URL].some((url) => url.startsWith('http://')))
      warnings.push({
        level: 'error',
        event: 'security.insecure_url',
        message: 'http:// AUTH_URL or APP_URL on loopback in production: cookies are not Secure',
      });
  }

  const appHost = new URL(raw.APP_URL).hostname;
  const rpId = (raw.PASSKEY_RP_ID ?? appHost).toLowerCase();
  // WebAuthn: the RP id must be the origin's host or a registrable suffix of it.
  if (appHost !== rpId && !appHost.endsWith(`.${rpId}`))
    problems.push(`PASSKEY_RP_ID: must be APP_URL's host or a parent domain of it`);

  if (problems.length > 0) throw new ConfigError(problems);

  const cors = parseCorsOrigins(raw.CORS_ORIGIN, production);
  warnings.push(...startupWarnings(raw, { production, development, hasStore, corsDisabled: cors === 'disabled' }));

  const provider = (id: string | undefined, key: string | undefined) =>
    id && key ? { clientId: id, clientSecret: key } : null;

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
      auth: {
        ttl: raw.RATE_LIMIT_AUTH_TTL,
        limit: raw.RATE_LIMIT_AUTH_LIMIT,
        blockDuration: raw.RATE_LIMIT_AUTH_BLOCK_DURATION,
      },
      account: { ttl: raw.RATE_LIMIT_ACCOUNT_TTL, limit: raw.RATE_LIMIT_ACCOUNT_LIMIT },
      api: { ttl: raw.RATE_LIMIT_API_TTL, limit: raw.RATE_LIMIT_API_LIMIT },
      scim: { ttl: raw.RATE_LIMIT_SCIM_TTL, limit: raw.RATE_LIMIT_SCIM_LIMIT },
      trustedProxyHops: raw.TRUSTED_PROXY_HOPS,
      ipv6Prefix: raw.RATE_LIMIT_IPV6_PREFIX,
    },
    email: {
      apiKey: raw.EMAIL_API_KEY ?? null,
      apiUrl: raw.EMAIL_API_URL ?? null,
      from: raw.EMAIL_FROM,
      budget: { perHour: raw.MAIL_BUDGET_PER_HOUR, perDay: raw.MAIL_BUDGET_PER_DAY },
    },
    cronSecret: raw.CRON_SECRET ?? null,
    docsEnabled: raw.DOCS_ENABLED ?? !production,
    accountDeletionGraceDays: raw.ACCOUNT_DELETION_GRACE_DAYS,
    apiKeyAuth: raw.API_KEY_AUTH === 'enabled',
    oauth: {
      google: provider(raw.GOOGLE_CLIENT_ID, raw.GOOGLE_CLIENT_SECRET),
      github: provider(raw.GITHUB_CLIENT_ID, raw.GITHUB_CLIENT_SECRET),
    },
    csp: { cdnHost: raw.CSP_CDN_HOST, avatarHost: raw.CSP_AVATAR_HOST },
    mfa: {
      totpIssuer: raw.TOTP_ISSUER,
      passkey: { rpId, rpName: raw.PASSKEY_RP_NAME, origin: raw.APP_URL },
    },
    webhooks: {
      retrySchedule: raw.WEBHOOK_RETRY_SCHEDULE,
      allowPrivateUrls: raw.WEBHOOK_ALLOW_PRIVATE_URLS ?? development,
      httpsOnly: production,
      maxEndpoints: raw.WEBHOOK_MAX_ENDPOINTS,
      allowedPorts: raw.WEBHOOK_ALLOWED_PORTS ?? (production ? [443] : [443, 80]),
    },
    stepUp: { maxAgeSeconds: raw.STEP_UP_MAX_AGE },
    sso: { allowPrivateUrls: raw.SSO_ALLOW_PRIVATE_URLS ?? development },
    dns: { servers: raw.DNS_SERVERS ?? null },
  };
  return { config, warnings };
}
