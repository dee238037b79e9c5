import { createHmac, timingSafeEqual } from 'node:crypto';
import { parse } from 'hono/utils/cookie';
import type { Config } from '../shared/config.js';
import { COOKIE_PREFIX } from './auth.js';

export interface CachedSession {
  sessionId: string;
  userId: string;
  /** The session's own expiry (ISO), as the cache recorded it. */
  expiresAt: string;
}

function equal(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** better-call's signed cookie, `<value>.<base64 HMAC-SHA256(secret, value)>`: the value, or null. */
function unsign(secret: string, signed: string): string | null {
  const dot = signed.lastIndexOf('.');
  if (dot < 1) return null;
  const value = signed.slice(0, dot);
  const signature = signed.slice(dot + 1);
  if (signature.length !== 44 || !signature.endsWith('=')) return null;
  const expected = createHmac('sha256', secret).update(value).digest();
  return equal(Buffer.from(signature, 'base64'), expected) ? value : null;
}

function cookieNames(config: Config) {
  const prefix = config.auth.secureCookies ? '__Secure-' : '';
  return {
    token: `${prefix}${COOKIE_PREFIX}.session_token`,
    data: `${prefix}${COOKIE_PREFIX}.session_data`,
    dontRemember: `${prefix}${COOKIE_PREFIX}.dont_remember`,
  };
}

export interface SessionTokenCookie {
  /** The session's token, its signature checked. */
  token: string;
  /** A "don't remember me" sign-in: the library never extends such a session. */
  dontRemember: boolean;
}

/**
 * Reads the library's signed session cookie as its get-session does
 * (better-call's `getSignedCookie`), with a synchronous HMAC: the token, or
 * null when the cookie is absent or its signature is wrong.
 */
export function createSessionTokenReader(config: Config) {
  const secret = config.auth.secret;
  const names = cookieNames(config);
  return (cookieHeader: string | undefined | null): SessionTokenCookie | null => {
    if (!cookieHeader?.includes(names.token)) return null;
    let cookies: Record<string, string>;
    try {
      cookies = parse(cookieHeader);
    } catch {
      return null;
    }
    const signed = cookies[names.token];
    const token = signed ? unsign(secret, signed) : null;
    if (!token) return null;
    const dontRemember = cookies[names.dontRemember];
    return { token, dontRemember: dontRemember !== undefined && unsign(secret, dontRemember) !== null };
  };
}

/**
 * Reads the session the library's signed cookie cache describes, checking it
 * exactly as better-auth's get-session does on a cache hit (better-call's
 * signed `session_token`, the compact `session_data` HMAC, token match,
 * version "1", both expiries) but with synchronous node:crypto HMACs and no
 * per-call key import or schema pass. Anything it is not sure of returns
 * null, and the caller asks the library, which then also renews or expires
 * cookies. It never accepts a cookie the library would refuse.
 */
export function createCookieCacheVerifier(
  config: Config,
  now: () => number = Date.now,
  { maxRemembered = 10_000 }: { maxRemembered?: number } = {},
) {
  const secret = config.auth.secret;
  // Cookies that verified, by their exact bytes, until the earlier of their
  // two expiries: a browser sends the same pair with every request for up to
  // five minutes, and both HMACs are deterministic. Only successes are kept
  // (junk cookies cannot fill it with anything but misses); oldest go first.
  const verified = new Map<string, { session: CachedSession; until: number }>();
  const { token: tokenName, data: dataName } = cookieNames(config);

  return (cookieHeader: string | undefined | null): CachedSession | null => {
    if (!cookieHeader?.includes(dataName)) return null;
    let cookies: Record<string, string>;
    try {
      cookies = parse(cookieHeader);
    } catch {
      return null;
    }
    const signedToken = cookies[tokenName];
    const data = cookies[dataName];
    if (!signedToken || !data) return null;
    const memoKey = `${signedToken}\n${data}`;
    const remembered = verified.get(memoKey);
    if (remembered) {
      if (remembered.until >= now()) return remembered.session;
      verified.delete(memoKey);
    }

    const token = unsign(secret, signedToken);
    if (!token) return null;

    // Compact cookie cache: base64url(JSON { session, expiresAt, signature }).
    let envelope: { session?: unknown; expiresAt?: unknown; signature?: unknown };
    try {
      envelope = JSON.parse(Buffer.from(data, 'base64url').toString('utf8'));
    } catch {
      return null;
    }
    const { session: payload, expiresAt, signature: dataSignature } = envelope ?? {};
    if (
      !payload ||
      typeof payload !== 'object' ||
      Array.isArray(payload) ||
      typeof expiresAt !== 'number' ||
      typeof dataSignature !== 'string'
    )
      return null;
    const expectedDataSignature = createHmac('sha256', secret)
      .update(JSON.stringify({ ...(payload as object), expiresAt }))
      .digest();
    if (
      !equal(Buffer.from(dataSignature, 'base64url'), expectedDataSignature) ||
      dataSignature !== expectedDataSignature.toString('base64url')
    )
      return null;

    const cached = payload as {
      session?: Record<string, unknown>;
      user?: Record<string, unknown>;
      version?: unknown;
      updatedAt?: unknown;
    };
    const session = cached.session;
    const user = cached.user;
    if (!session || !user || typeof cached.updatedAt !== 'number') return null;
    if (session.token !== token || (cached.version ?? '1') !== '1') return null;
    const sessionExpiry = new Date(String(session.expiresAt)).getTime();
    const current = now();
    if (expiresAt < current || !Number.isFinite(sessionExpiry) || sessionExpiry < current) return null;
    if (typeof session.id !== 'string' || typeof user.id !== 'string' || session.userId !== user.id) return null;
    const result = { sessionId: session.id, userId: user.id, expiresAt: new Date(sessionExpiry).toISOString() };
    if (verified.size >= maxRemembered) verified.delete(verified.keys().next().value!);
    verified.set(memoKey, { session: result, until: Math.min(expiresAt, sessionExpiry) });
    return result;
  };
}
