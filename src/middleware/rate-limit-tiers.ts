import { isScimPath } from '../shared/scim-error.js';

/**
 * The tier a request is counted in besides the global one (docs/api.md
 * "Rate limiting"); `scim` instead of it: SCIM's door counts its own
 * (src/middleware/scim.ts), so a directory's sync spends no user's budget.
 */
export type RateLimitTierName = 'auth' | 'global' | 'scim';
export type TierOf = (path: string) => RateLimitTierName;

/**
 * The service's own routes in the auth tier (each also covers the paths below
 * it): the account purge and step-up take a password or a code, and guessing
 * one is what the tier limits. The library's come from its routes' rows.
 */
export const SERVICE_AUTH_TIER_PATHS = ['/api/users/me/purge', '/api/session/step-up'] as const;

/** Letter case, repeated slashes, `.` segments and a trailing slash never buy a fresh budget. */
export function normalizePath(path: string): string {
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // keep the raw path: a malformed escape is not a way around the limiter
  }
  const segments = decoded
    .toLowerCase()
    .split('/')
    .filter((segment) => segment !== '' && segment !== '.');
  return `/${segments.join('/')}`;
}

/** What the library routes' rows tell the rate limiter (src/library/routes.ts). */
export interface LibraryRateLimits {
  /** The library's auth-tier paths: each covers the paths below it. */
  authPrefixes: readonly string[];
  /** The POST paths whose body's `email` names the account whose wrong passwords count (password sign-in). */
  namedAccountPaths: readonly string[];
}

export interface RateLimitTiers {
  /** The auth tier's paths, the library's and the service's own. */
  authPaths: readonly string[];
  /** `auth` for each of them and every path below it, however spelled (`normalizePath`). */
  tierOf: TierOf;
  /** Whether a POST to this path names the account to count in the account tier. */
  namesAccount: (path: string) => boolean;
}

export function rateLimitTiers({ authPrefixes, namedAccountPaths }: LibraryRateLimits): RateLimitTiers {
  const authPaths = [...authPrefixes, ...SERVICE_AUTH_TIER_PATHS];
  return {
    authPaths,
    tierOf: (path) => {
      if (isScimPath(path)) return 'scim';
      const normalized = normalizePath(path);
      return authPaths.some((prefix) => normalized === prefix || normalized.startsWith(`${prefix}/`))
        ? 'auth'
        : 'global';
    },
    namesAccount: (path) => namedAccountPaths.includes(normalizePath(path)),
  };
}

/**
 * Who a SCIM request is counted as (docs/api.md "Rate limiting"): the token
 * it presents (its SHA-256, so no lookup comes first), else its address.
 */
export function scimRateIdentity(presentedDigest: string | null, addressIdentity: string): string {
  return presentedDigest ? `scim:${presentedDigest}` : `ip:${addressIdentity}`;
}
