import type { Kysely, Transaction } from 'kysely';
import type { z } from 'zod';
import type { Access, OrganizationTarget } from '../auth/access.js';
import type { SessionCreation } from '../auth/second-factor.js';
import type { Database } from '../db/database.js';
import type { RateLimitTierName } from '../middleware/rate-limit-tiers.js';
import type { RateLimitStore } from '../platform/rate-limit-store.js';
import type { Config } from '../shared/config.js';
import type { Clock, EnrichedSession } from '../shared/types.js';

export type JsonObject = Record<string, unknown>;

/** One call of a library route, as its functions see it. */
export interface LibraryCall {
  /** The caller's session (loaded for every call with a transaction, so that it records who acted). */
  session: EnrichedSession | null;
  /** The organization the guard authorized the call in, and the caller's permissions there. */
  target: OrganizationTarget | undefined;
  organizationId: string | null;
  /** The checked JSON body (after `rewrite`: what the library gets). */
  body: JsonObject | null;
  /** The checked query string (a reset token may travel there). */
  query: Record<string, string>;
  /** What one of the route's functions keeps for a later one. */
  notes: {
    /** The caller's passkey a delete is about to remove. */
    passkey?: { id: string; name: string | null; device_type: string };
    /** Whose password a reset token resets (the library consumes the token). */
    resetUserId?: string;
    /** Our role slug an invitation names (the library is told `member`). */
    invitedRoleSlug?: string;
  };
}

export interface LibraryDeps {
  db: Kysely<Database>;
  store: RateLimitStore;
  clock: Clock;
  config: Config;
}

/** Rewrites the body the library gets, before any transaction: a refusal throws. */
export type InputRewrite = (call: LibraryCall, deps: LibraryDeps) => Promise<JsonObject>;
/** Answers in the library's place, from the service's own data: the library is not called. */
export type ServiceAnswer = (call: LibraryCall, deps: LibraryDeps) => Promise<unknown>;
/** Our writes and checks before the library's, in the call's transaction. */
export type BeforeHook = (trx: Transaction<Database>, call: LibraryCall) => Promise<void>;
export interface LibraryOutcome {
  /** The library's JSON answer. */
  body: unknown;
  /** The session token the answer set in its cookie, when it issued one. */
  issuedToken: string | null;
  now: Date;
}
/** Our writes after the library's success, in the same transaction; returns the body to answer with. */
export type AfterHook = (trx: Transaction<Database>, call: LibraryCall, outcome: LibraryOutcome) => Promise<unknown>;
/** The JSON body to answer with from the library's answer (any status); undefined: the usual answer. */
export type Reply = (call: LibraryCall, body: unknown) => unknown;

/**
 * Whether the library's call runs in one transaction with the route's hooks:
 * `none` (no hooks), `rollback-refusals` (a refusal rolls back whatever the
 * library wrote), `commit-refusals` (a refusal commits what the library wrote
 * before refusing, such as failed-attempt counters).
 */
export type TransactionMode = 'none' | 'rollback-refusals' | 'commit-refusals';

interface Row {
  method: 'GET' | 'POST';
  /** Under /api/auth; `:name` matches one path segment. */
  path: string;
  /** One line: what the route does (the OpenAPI document's summary). */
  summary: string;
  access: Access;
  /**
   * The rate-limit tier. It covers the row's first path segment: every path
   * the library mounts below it (served or not, then 404) counts the same.
   */
  tier: RateLimitTierName;
  /** Where the organization the call acts on travels (the gate resolves it and writes it into the request). */
  organization?: 'body' | 'query' | 'invitation';
  body?: z.ZodType;
  query?: z.ZodType;
  /**
   * The body is a form (`application/x-www-form-urlencoded`) that another
   * site's page posts (a SAML response, docs/sso.md "Sign-in"), checked by
   * this schema. The one kind of request the CSRF check lets in from a
   * foreign origin (src/middleware/csrf.ts), so it reaches the library with
   * no cookie at all: no session is read or acted with there.
   */
  foreignForm?: z.ZodType;
  /** How the sessions the call creates are marked (src/auth/session-marks.ts); none: it creates none. */
  newSessions?: SessionCreation;
  /**
   * The call checks a password, so it spends the account's wrong-password
   * budget (docs/api.md "Rate limiting"). `named-account`: the account the
   * body's `email` names, reserved by the rate limiter before anything reads
   * the request and given back unless answered 401 (password sign-in).
   * `session-user`: the session user's, spent by a refusal, as a failed
   * sign-in or step-up does, so a stolen session is no password oracle.
   */
  spendsAccountBudget?: 'named-account' | 'session-user';
  /** The library reads the session from its cookie cache while the service agrees the session stands. */
  keepsCookieCache?: true;
  /** Input rewrites: invite-member's role check and mail budget, revoke-session's id -> token. */
  rewrite?: InputRewrite;
  /** The service answers instead of the library (has-permission, get-active-member-role). */
  answer?: ServiceAnswer;
  /** The answer shaped from the library's (get-session, list-sessions). */
  reply?: Reply;
}

/** What each library route declares (library/routes.ts). Hooks exist only with a transaction. */
export type LibraryRoute = Row &
  (
    | { transaction: 'none'; before?: never; after?: never }
    | { transaction: Exclude<TransactionMode, 'none'>; before?: BeforeHook; after?: AfterHook }
  );
