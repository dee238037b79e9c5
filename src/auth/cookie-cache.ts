import { getCookieCache } from 'better-auth/cookies';
import type { Config } from '../config.js';
import { COOKIE_PREFIX } from './auth.js';

/**
 * Reads the library's signed cookie cache (its own verifier, same secret and
 * cookie name): the signed-in user's id without a database round trip, or
 * null when the cookie is absent, tampered, expired or signed with another
 * secret. Used only to pick the rate-limit identity (spec §8 rule 2).
 */
export function createCookieCacheReader(config: Config) {
  const options = { secret: config.auth.secret, cookiePrefix: COOKIE_PREFIX, isSecure: config.auth.secureCookies, strategy: 'compact' as const };
  return async (headers: Headers): Promise<{ userId: string } | null> => {
    if (!headers.get('cookie')) return null;
    try {
      const payload = await getCookieCache(headers, options);
      return payload ? { userId: payload.user.id } : null;
    } catch {
      return null;
    }
  };
}
