/**
 * Every code the service itself produces, with its one status and what it
 * means (docs/api.md "Errors"). The OpenAPI document's `ErrorCode` enum and
 * each response's description are generated from this table.
 */
export const ERRORS = {
  VALIDATION_ERROR: {
    status: 400,
    description:
      'malformed JSON, wrong types, unknown body fields, a path id that is not a UUID v4, bad query parameters, a cursor the service did not issue (`details` name them)',
  },
  UNAUTHORIZED: {
    status: 401,
    description: 'no valid session on a route that needs one; an API key where keys are not taken',
  },
  INVALID_CREDENTIALS: { status: 401, description: 'a step-up proof that is missing, extra or wrong' },
  FORBIDDEN: {
    status: 403,
    description: 'the platform role does not match the route; a cross-site request; an API key on a sensitive action',
  },
  NO_ACTIVE_ORGANIZATION: { status: 403, description: 'the session has no active organization' },
  INSUFFICIENT_PERMISSIONS: {
    status: 403,
    description:
      'the caller lacks a permission the route needs, or one it tries to grant (a role, an invitation, API-key scopes; `details` name them)',
  },
  ACCOUNT_SCHEDULED_FOR_DELETION: {
    status: 403,
    description: 'the account is scheduled for deletion and the route is not on the allowlist',
  },
  NOT_OWNER: { status: 403, description: 'an ownership transfer by a caller who is not the current Owner' },
  MFA_REQUIRED: {
    status: 403,
    description: 'the organization requires multi-factor sessions; message `Multi-factor authentication required`',
  },
  STEP_UP_REQUIRED: {
    status: 403,
    description:
      'a sensitive action: the session has not proved every factor of its account within STEP_UP_MAX_AGE; message `Recent authentication required`; `POST /api/session/step-up` renews it',
  },
  SSO_REQUIRED: {
    status: 403,
    description:
      'the organization requires single sign-on: a member whose email is at its verified domain, in a session that did not come through its SSO; message `Single sign-on required`',
  },
  NOT_FOUND: {
    status: 404,
    description: 'an unknown id, and also an id of another organization (never revealing that it exists)',
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    description: 'a served path asked with a method it does not serve; `Allow` names those it does',
  },
  SLUG_CONFLICT: { status: 409, description: 'a role slug already used in the organization' },
  OWNERSHIP_CONSTRAINT: { status: 409, description: 'a change that would leave an organization without an Owner' },
  DEFAULT_ROLE: {
    status: 409,
    description: "deleting or renaming a default role, or changing the Owner role's permissions",
  },
  TARGET_NOT_ADMIN: {
    status: 409,
    description: 'an ownership transfer to a member who is not an Admin of the organization',
  },
  DOMAIN_TAKEN: { status: 409, description: 'an SSO domain another organization has verified' },
  DOMAIN_NOT_VERIFIED: {
    status: 409,
    description: "no TXT record at the domain's `txtName` holds its `txtValue` (yet)",
  },
  QUOTA_EXCEEDED: { status: 409, description: 'over a per-organization quota (WEBHOOK_MAX_ENDPOINTS)' },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    description: 'a body over 1,048,576 bytes, announced by Content-Length or streamed',
  },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, description: 'a body that is not JSON on a JSON route' },
  RATE_LIMITED: {
    status: 429,
    description: 'too many requests; the X-RateLimit-* and Retry-After headers say when to retry',
  },
  INTERNAL_ERROR: { status: 500, description: 'anything unexpected (logged with the request id)' },
  SERVICE_UNAVAILABLE: { status: 503, description: 'the database or the rate-limit store does not answer' },
} as const satisfies Record<string, { status: number; description: string }>;

export type ErrorCode = keyof typeof ERRORS;

/** The codes, in the table's order (by status). */
export const ERROR_CODES = Object.keys(ERRORS) as [ErrorCode, ...ErrorCode[]];

/** Each code's one status. */
export const ERROR_STATUS = Object.fromEntries(ERROR_CODES.map((code) => [code, ERRORS[code].status])) as {
  readonly [C in ErrorCode]: (typeof ERRORS)[C]['status'];
};

export interface ErrorDetail {
  path: string;
  message: string;
}

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  details?: ErrorDetail[];
}

/**
 * Thrown by handlers, middleware and queries. It carries a code and knows no
 * HTTP: its status is the code's in ERROR_STATUS, applied when the app
 * renders it (src/middleware/render-error.ts).
 */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetail[] | undefined;
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { details?: ErrorDetail[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.code = code;
    this.details = options.details;
    this.headers = options.headers ?? {};
  }

  toBody(): ErrorBody {
    return this.details
      ? { code: this.code, message: this.message, details: this.details }
      : { code: this.code, message: this.message };
  }
}

/** Errors raised by the database driver when the server cannot be reached or the pool is exhausted. */
export function isUnavailableError(error: unknown): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (current && typeof current === 'object' && !seen.has(current)) {
    seen.add(current);
    const { code, message } = current as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
    if (
      typeof message === 'string' &&
      /connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect/i.test(message)
    )
      return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'POOL_TIMEOUT', // db/client.ts: no pool connection free in time
  '57014', // query_canceled: statement_timeout
  '55P03', // lock_not_available: lock_timeout
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** Name and message only: never a stack or a driver's parameter values in a log line. */
export function describeError(error: unknown): { name: string; message: string; code?: string } {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return { name: error.name, message: error.message, ...(typeof code === 'string' ? { code } : {}) };
  }
  return { name: 'NonError', message: String(error) };
}

/** 429 RATE_LIMITED with the four headers of docs/api.md "Rate limiting" (on 429 only); `reset` in Unix milliseconds. */
export function tooMany(decision: { limit: number; remaining: number; reset: number }, now: Date): ApiError {
  const retryAfter = Math.max(1, Math.ceil((decision.reset - now.getTime()) / 1000));
  return new ApiError('RATE_LIMITED', 'Too many requests', {
    headers: {
      'X-RateLimit-Limit': String(decision.limit),
      'X-RateLimit-Remaining': String(Math.max(0, decision.remaining)),
      'X-RateLimit-Reset': String(Math.ceil(decision.reset / 1000)),
      'Retry-After': String(retryAfter),
    },
  });
}
