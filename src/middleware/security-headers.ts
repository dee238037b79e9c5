import type { MiddlewareHandler } from 'hono';

export interface SecurityHeadersOptions {
  /** Fills `{cdn_host}` of docs/api.md "Security headers" (the API docs page's scripts and styles). */
  cdnHost: string;
  /** Fills `{avatar_host}` (profile images of the OAuth providers). */
  avatarHost: string;
}

/** config.ts's defaults for CSP_CDN_HOST and CSP_AVATAR_HOST, for callers without a config (the listener's own answers). */
export const DEFAULT_CSP_HOSTS: SecurityHeadersOptions = {
  cdnHost: 'https://cdn.jsdelivr.net',
  avatarHost: 'https://lh3.googleusercontent.com https://avatars.githubusercontent.com',
};

const sources = (...values: string[]) =>
  values
    .flatMap((value) => value.split(/\s+/))
    .filter(Boolean)
    .join(' ');

/**
 * docs/api.md "Security headers", exact values: the one table the
 * middleware and the Node listener's own answers (node-listener.ts) send.
 * Cross-Origin-Embedder-Policy is never sent.
 */
export function securityHeaderValues({ cdnHost, avatarHost }: SecurityHeadersOptions): Record<string, string> {
  return {
    'Content-Security-Policy': [
      "default-src 'none'",
      `script-src ${sources("'self'", "'unsafe-inline'", cdnHost)}`,
      `style-src ${sources("'self'", "'unsafe-inline'", cdnHost)}`,
      `img-src ${sources("'self'", 'data:', avatarHost)}`,
      "font-src 'self'",
      "connect-src 'self'",
    ].join('; '),
    'Strict-Transport-Security': 'max-age=31536000; includeSubDomains',
    'X-Frame-Options': 'DENY',
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'Permissions-Policy': 'camera=(), microphone=(), geolocation=()',
  };
}

/** docs/api.md "Security headers", in every environment: the table above on every response, and no X-Powered-By. */
export function securityHeaders(options: SecurityHeadersOptions): MiddlewareHandler {
  const headers = Object.entries(securityHeaderValues(options));
  return async function securityHeaders(c, next) {
    await next();
    for (const [name, value] of headers) c.res.headers.set(name, value);
    c.res.headers.delete('X-Powered-By');
  };
}
