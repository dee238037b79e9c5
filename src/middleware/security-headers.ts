import { secureHeaders } from 'hono/secure-headers';
import type { MiddlewareHandler } from 'hono';

export interface SecurityHeadersOptions {
  /** Fills the spec's `{cdn_host}` (the API docs page's scripts and styles). */
  cdnHost: string;
  /** Fills the spec's `{avatar_host}` (profile images of the OAuth providers). */
  avatarHost: string;
}

const sources = (...values: string[]) => values.flatMap((value) => value.split(/\s+/)).filter(Boolean);

/**
 * Spec §8 "Security headers (all responses)", exact values, in every
 * environment. Only the spec's headers: hono's other defaults are turned off,
 * and Cross-Origin-Embedder-Policy is never sent.
 */
export function securityHeaders({ cdnHost, avatarHost }: SecurityHeadersOptions): MiddlewareHandler {
  return secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      scriptSrc: sources("'self'", "'unsafe-inline'", cdnHost),
      styleSrc: sources("'self'", "'unsafe-inline'", cdnHost),
      imgSrc: sources("'self'", 'data:', avatarHost),
      fontSrc: ["'self'"],
      connectSrc: ["'self'"],
    },
    strictTransportSecurity: 'max-age=31536000; includeSubDomains',
    xFrameOptions: 'DENY',
    xContentTypeOptions: 'nosniff',
    referrerPolicy: 'no-referrer',
    permissionsPolicy: { camera: [], microphone: [], geolocation: [] },
    crossOriginEmbedderPolicy: false,
    crossOriginResourcePolicy: false,
    crossOriginOpenerPolicy: false,
    originAgentCluster: false,
    xDnsPrefetchControl: false,
    xDownloadOptions: false,
    xPermittedCrossDomainPolicies: false,
    xXssProtection: false,
    removePoweredBy: true,
  });
}
