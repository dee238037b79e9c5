// The clients this SPA uses: the typed one (`gatehouse/client`, generated
// from the OpenAPI document) for the service's routes and for the auth
// library's plain JSON calls under `/api/auth` (sign-up, sign-in, sign-out,
// organizations, invitations), and better-auth's own for the flows its
// plugins drive (passkey ceremonies, OAuth redirects, second factors). Both
// send the session cookie (`credentials: 'include'`): it is HttpOnly on the
// API's origin, so this page never sees it.
import { passkeyClient } from '@better-auth/passkey/client';
import { createAuthClient } from 'better-auth/client';
import { magicLinkClient, organizationClient, twoFactorClient } from 'better-auth/client/plugins';
import { type components, createGatehouseClient, type GatehouseError } from 'gatehouse/client';

/** Set when the example is built (examples/spa/serve.ts: GATEHOUSE_API_URL, default http://localhost:4000). */
declare const GATEHOUSE_API_URL: string;
export const API_URL = GATEHOUSE_API_URL;

export const auth = createAuthClient({
  baseURL: API_URL,
  basePath: '/api/auth',
  plugins: [organizationClient(), magicLinkClient(), twoFactorClient(), passkeyClient()],
});

export const api = createGatehouseClient({ baseUrl: API_URL });

/** A permission name, as the roles and API-key routes take it (the checkboxes offer the session's own). */
export type Permission = components['schemas']['CreateRole']['permissions'][number];

/** What the API said, as one line: `403 MFA_REQUIRED The organization requires…`. */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${status} ${code} ${message}`.trim());
    this.name = 'ApiFailure';
  }
}

interface LibraryError {
  status: number;
  code?: string | undefined;
  message?: string | undefined;
}

/**
 * The data of a call, or an ApiFailure: better-auth's client answers
 * `{ data, error: { status, code, message } }`, openapi-fetch answers
 * `{ data, error: { code, message }, response }`; both land here.
 */
export async function must<T>(
  call: Promise<{ data?: T | null; error?: GatehouseError | LibraryError | null; response?: Response }>,
): Promise<T> {
  const result = await call;
  if (result.error) {
    const status = result.response?.status ?? ('status' in result.error ? result.error.status : 0);
    throw new ApiFailure(status, result.error.code ?? '', result.error.message ?? '');
  }
  return result.data as T;
}
