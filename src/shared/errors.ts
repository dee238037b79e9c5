/** API.md "Errors": every code the service itself produces, with its one status. */
export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  UNAUTHORIZED: 401,
  INVALID_CREDENTIALS: 401,
  FORBIDDEN: 403,
  NO_ACTIVE_ORGANIZATION: 403,
  INSUFFICIENT_PERMISSIONS: 403,
  ACCOUNT_SCHEDULED_FOR_DELETION: 403,
  NOT_OWNER: 403,
  MFA_REQUIRED: 403,
  STEP_UP_REQUIRED: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  SLUG_CONFLICT: 409,
  OWNERSHIP_CONSTRAINT: 409,
  DEFAULT_ROLE: 409,
  TARGET_NOT_ADMIN: 409,
  QUOTA_EXCEEDED: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const satisfies Record<string, number>;

export type ErrorCode = keyof typeof ERROR_STATUS;

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

/** 429 RATE_LIMITED with the four headers of API.md (on 429 only); `reset` in Unix milliseconds. */
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
