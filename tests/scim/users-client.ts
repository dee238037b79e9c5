import { expect } from 'vitest';
import { generateScimToken } from '../../src/auth/scim-token-material.js';
import { insertScimToken } from '../../src/db/queries/scim-tokens.js';
import type { TestApp } from '../support/app.js';
import { call, expectStatus } from '../support/http.js';
import type { TestOrganization } from '../support/orgs.js';

/** A directory's view of /api/scim/v2 for the Users suites: a token of the organization, and its requests. */
export const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
export const PATCH = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

export type Scim = (
  path: string,
  options?: { method?: string; body?: unknown; headers?: Record<string, string> },
) => Promise<Response>;

export function scimClient(t: TestApp, token: string): Scim {
  return (path, { method, body, headers } = {}) =>
    call(t, `/api/scim/v2${path}`, {
      method,
      body,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/scim+json' } : {}),
        ...headers,
      },
    });
}

/**
 * A token of the organization, minted by its Owner through POST /api/scim/tokens; where that
 * route is not served, stored as that route stores one (its material, its query).
 */
export async function mintToken(t: TestApp, org: TestOrganization): Promise<{ token: string; id: string }> {
  const res = await call(t, '/api/scim/tokens', { body: { name: 'directory' }, jar: org.owner.jar });
  if (res.status !== 404) return expectStatus(res, 201);
  const material = generateScimToken();
  const row = await insertScimToken(t.db, { tenantId: org.id, createdBy: org.owner.id, name: 'directory', material });
  return { token: material.token, id: row.id };
}

export async function expectScim<T = any>(response: Response, status: number, scimType?: string): Promise<T> {
  const body = await expectStatus<any>(response, status);
  if (status !== 204) expect(response.headers.get('content-type')).toBe('application/scim+json');
  if (status >= 400) expect(body.scimType).toBe(scimType);
  return body as T;
}
