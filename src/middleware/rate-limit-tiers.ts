/** The tier a request is counted in besides the global one (docs/api.md "Rate limiting"). */
export type RateLimitTierName = 'auth' | 'global';
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

/**
 * The auth tier's paths, the library's (`libraryPrefixes`, from its rows) and
 * the service's own, and the tier of a request path: `auth` for each of them
 * and every path below it, however spelled (`normalizePath`).
 */
export function rateLimitTiers(libraryPrefixes: readonly string[]): { authPaths: readonly string[]; tierOf: TierOf } {
  const authPaths = [...libraryPrefixes, ...SERVICE_AUTH_TIER_PATHS];
  const tierOf: TierOf = (path) => {
    const normalized = normalizePath(path);
    return authPaths.some((prefix) => normalized === prefix || normalized.startsWith(`${prefix}/`)) ? 'auth' : 'global';
  };
  return { authPaths, tierOf };
}
