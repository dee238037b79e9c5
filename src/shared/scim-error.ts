/**
 * SCIM's own error answer (RFC 7644 §3.12), which every answer under
 * `/api/scim/v2` takes instead of the service's shape (docs/api.md "Errors"
 * stays the service's): `{ schemas: [ERROR_URN], status: "404", scimType?,
 * detail }`, as `application/scim+json`. The error thrown is src/scim/errors.ts
 * `ScimError` (or any ApiError, mapped); src/middleware/render-error.ts renders it.
 */
export const SCIM_PREFIX = '/api/scim/v2';
export const SCIM_MEDIA_TYPE = 'application/scim+json';
export const SCIM_ERROR_URN = 'urn:ietf:params:scim:api:messages:2.0:Error';

export interface ScimErrorBody {
  schemas: [typeof SCIM_ERROR_URN];
  status: string;
  scimType?: string;
  detail: string;
}

export function scimErrorBody(status: number, scimType: string | undefined, detail: string): ScimErrorBody {
  return { schemas: [SCIM_ERROR_URN], status: String(status), ...(scimType ? { scimType } : {}), detail };
}

/** A path SCIM's door serves: the prefix itself and everything below it, spelled as the router matches it. */
export function isScimPath(path: string): boolean {
  return path === SCIM_PREFIX || path.startsWith(`${SCIM_PREFIX}/`);
}
