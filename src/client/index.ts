/**
 * A typed client for everything the OpenAPI document describes: the
 * service's own routes and the auth library's under `/api/auth` (sign-up,
 * sign-in, sessions, second factors, organizations; README "Typed client").
 * Types come from src/client/schema.d.ts, generated
 * from the document; calls go through openapi-fetch with the session cookie
 * (`credentials: 'include'`), so an SPA on another origin listed in
 * CORS_ORIGIN signs in once and calls on.
 *
 *   const api = createGatehouseClient({ baseUrl: 'https://auth.example.com' });
 *   const { data, error } = await api.GET('/api/roles');
 *   if (error) console.warn(error.code, error.message); // GatehouseError
 *   await api.POST('/api/auth/sign-in/email', { body: { email, password } });
 *
 * Imports nothing of the server: it is what `gatehouse/client` exports.
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './schema.js';

export type { components, paths } from './schema.js';

/** Every error the service answers: `{ code, message, details? }`. */
export type GatehouseError = components['schemas']['Error'];

export type GatehouseClient = Client<paths>;

export interface GatehouseClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** Where the service is, e.g. `https://auth.example.com` (no trailing `/api`). */
  baseUrl: string;
}

export function createGatehouseClient({ baseUrl, ...options }: GatehouseClientOptions): GatehouseClient {
  return createClient<paths>({ credentials: 'include', ...options, baseUrl: baseUrl.replace(/\/+$/, '') });
}
