import type { Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { ScimError } from '../scim/errors.js';
import { ApiError, describeError, ERROR_STATUS, isUnavailableError } from '../shared/errors.js';
import { isScimPath, SCIM_MEDIA_TYPE, type ScimErrorBody, scimErrorBody } from '../shared/scim-error.js';
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
 * Any thrown value as SCIM's error (RFC 7644 §3.12), for answers under
 * /api/scim/v2: a ScimError as thrown; the service's errors with their
 * status, headers and message, a body the JSON check refused as
 * `invalidSyntax`, a value the schema refused as `invalidValue`, the last
 * Owner's refusal as `mutability` (docs/scim.md "Roles").
 */
export function toScimAnswer(error: unknown): {
  body: ScimErrorBody;
  status: number;
  headers: Record<string, string>;
  cause: unknown;
} {
  if (error instanceof ScimError)
    return {
      body: scimErrorBody(error.status, error.scimType, error.detail),
      status: error.status,
      headers: {},
      cause: error,
    };
  const apiError = toApiError(error);
  let scimType: string | undefined;
  if (apiError.code === 'VALIDATION_ERROR')
    scimType = apiError.details?.every((detail) => detail.path === '') ? 'invalidSyntax' : 'invalidValue';
  if (apiError.code === 'OWNERSHIP_CONSTRAINT') scimType = 'mutability';
  const detail = apiError.details?.length
    ? `${apiError.message}: ${apiError.details.map((d) => (d.path ? `${d.path} ${d.message}` : d.message)).join('; ')}`
    : apiError.message;
  const status = ERROR_STATUS[apiError.code];
  return {
    body: scimErrorBody(status, scimType, detail),
    status,
    headers: apiError.headers,
    cause: apiError.cause ?? error,
  };
}

/**
 * The one error renderer (`app.onError`): any thrown value as the contract's
 * error body, with the status ERROR_STATUS gives its code; only 5xx are
 * logged. Under /api/scim/v2 every answer is SCIM's error instead, as
 * `application/scim+json` (docs/scim.md).
 */
export function renderError(error: unknown, c: Context<AppEnv>): Response {
  if (isScimPath(c.req.path) || error instanceof ScimError) return renderScimError(error, c);
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

function renderScimError(error: unknown, c: Context<AppEnv>): Response {
  const { body, status, headers, cause } = toScimAnswer(error);
  if (status >= 500) c.get('logger')?.error('request.failed', { scimStatus: status, error: describeError(cause) });
  return c.body(JSON.stringify(body), status as ContentfulStatusCode, {
    ...headers,
    'Content-Type': SCIM_MEDIA_TYPE,
    'Cache-Control': 'no-store',
  });
}
