/**
 * A typed client for the service's own routes (everything the OpenAPI
 * document describes; `/api/auth/*` is better-auth's: use its client, see
 * README "Typed client"). Types come from src/client/schema.d.ts, generated
 * from the document; calls go through openapi-fetch with the session cookie
 * (`credentials: 'include'`), so an SPA on another origin listed in
 * CORS_ORIGIN signs in once and calls on.
 *
 *   const api = createGatehouseClient({ baseUrl: 'https://auth.example.com' });
 *   const { data, error } = await api.GET('/api/roles');
 *   if (error) console.warn(error.code, error.message); // GatehouseError
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
