import type { Context } from 'hono';
import type { Logger } from './logger.js';
import type { PlatformRole } from './permissions.js';

export type { Clock } from './clock.js';

/** The session a request carries, resolved once by the session middleware (docs/api.md "Sessions"). */
export interface EnrichedSession {
  user: {
    id: string;
    email: string;
    name: string;
    role: PlatformRole;
    emailVerified: boolean;
    twoFactorEnabled: boolean;
  };
  /**
   * `mfa`: created by a passkey, or completed a second factor (docs/security.md).
   * `stepUpUntil`: when the session's proof of every factor stops counting
   * (ISO; in the past once stale, and for a session that never proved them).
   */
  session: { id: string; activeOrganizationId: string | null; expiresAt: string; mfa: boolean; stepUpUntil: string };
  permissions: string[];
  /** The active organization requires multi-factor sessions. Not part of the JSON session. */
  requireMfa: boolean;
  /**
   * The active organization's single sign-on policy binds this session
   * (docs/sso.md "Policy"), and whether the user is an Owner there (the
   * policy's break-glass). Never for an API key. Not part of the JSON session.
   */
  ssoRequired: boolean;
  isOwner: boolean;
  /**
   * Records that this session used an Owner's break-glass in an organization
   * (audited `sso.bypassed` once per session and organization). The guard
   * calls it; an API key never. Not part of the JSON session.
   */
  recordSsoBypass: (organizationId: string) => Promise<void>;
  /** When set, the account is scheduled for deletion (docs/api.md "Accounts scheduled for deletion"). Not part of the JSON session. */
  deletedAt: string | null;
  /** When a scheduled account is due for purge (deletedAt + ACCOUNT_DELETION_GRACE_DAYS). */
  purgeAfter: string | null;
  /**
   * The session proved every factor of its account within STEP_UP_MAX_AGE,
   * by the app's clock when it was resolved: it may perform sensitive
   * actions. Never for an API key. Not part of the JSON session.
   */
  stepUpFresh: boolean;
  /** Set when an API key (API_KEY_AUTH=enabled) authenticated the request instead of a session cookie. */
  apiKey: { id: string } | null;
}

/**
 * Who calls under /api/scim/v2: a SCIM token in force, its organization, and
 * the person who created it, whose power over the Owner role the token
 * carries (docs/scim.md "Tokens"), read from the token's row, never the request.
 */
export interface ScimCaller {
  tokenId: string;
  tenantId: string;
  createdBy: string;
}

export type AppEnv = {
  Variables: {
    requestId: string;
    logger: Logger;
    /** Installed by the session middleware: resolves the session once, on first use. */
    loadSession: () => Promise<EnrichedSession | null>;
    /** The resolved session; set once loadSession has run (null: no valid session). */
    session: EnrichedSession | null;
    /** The organization the guard authorized the request in (routes that need one); read with `tenantOf`. */
    tenantId: string;
    /** The client address the rate limiter keys on (docs/security.md "Client addresses"). */
    clientIp: string;
    /** Set by SCIM's door under /api/scim/v2 only (src/middleware/scim.ts); read with `scimOf`. */
    scim: ScimCaller;
  };
};

/** Finds the request's session (cookie or API key); the session middleware calls it at most once per request. */
export type SessionResolver = (c: Context<AppEnv>) => Promise<EnrichedSession | null>;
