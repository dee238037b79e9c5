import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { ApiError, describeError, ERROR_STATUS, isUnavailableError } from '../shared/errors.js';
import type { AppEnv } from '../shared/types.js';

/** Maps any thrown value to the contract's shape: `renderError` is the one caller. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof HTTPException) {
    const status = error.status;
    if (status === 413) return new ApiError('PAYLOAD_TOO_LARGE', 'Request body exceeds 1048576 bytes');
    if (status === 400) return new ApiError('VALIDATION_ERROR', 'Malformed request');
    if (status === 401) return new ApiError('UNAUTHORIZED', 'Unauthorized');
    if (status === 403) return new ApiError('FORBIDDEN', 'Forbidden');
    if (status === 404) return new ApiError('NOT_FOUND', 'Not found');
    if (status === 415) return new ApiError('UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
  }
  if (isUnavailableError(error))
    return new ApiError('SERVICE_UNAVAILABLE', 'Service temporarily unavailable', { cause: error });
  return new ApiError('INTERNAL_ERROR', 'Internal server error', { cause: error });
}

/**
 * The one error renderer (`app.onError`): any thrown value as the contract's
 * error body, with the status ERROR_STATUS gives its code; only 5xx are logged.
 */
export function renderError(error: unknown, c: Context<AppEnv>): Response {
  const apiError = toApiError(error);
  const status = ERROR_STATUS[apiError.code];
  if (status >= 500) {
    c.get('logger')?.error('request.failed', {
      code: apiError.code,
      error: describeError(apiError.cause ?? error),
    });
  }
  return c.json(apiError.toBody(), status, apiError.headers);
}
