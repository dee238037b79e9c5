/**
 * Every request the service makes to an identity provider (discovery, the
 * token endpoint, the JWKS) goes through here (docs/sso.md "Addresses"). The URL passes
 * the webhook address rules first (src/webhooks/url-policy.ts): `https://`
 * only where the policy says so, and no private, loopback or link-local
 * address unless private URLs are allowed; a host name is resolved where the
 * runtime can (Node) and every address must pass. A redirect is never
 * followed: an IdP endpoint that answers 302 to an internal address would
 * make the service request it (server-side request forgery), the address
 * rules notwithstanding. The answer has 5 seconds and 256 KiB, counted as the
 * body arrives (a Content-Length can lie or be absent). Only fetch and the
 * web streams: Node and Workers alike.
 */

import type { Config } from '../shared/config.js';
import { checkWebhookUrl } from '../webhooks/url-policy.js';

export interface SsoFetchPolicy {
  /** On Node, ideally a fetch that connects only to the addresses it checked (src/webhooks/pinned-fetch.ts). */
  fetch: typeof fetch;
  /** Issuer, discovery, token and JWKS URLs may be at private, loopback and link-local addresses. */
  allowPrivateUrls: boolean;
  /** `https://` only (production). */
  httpsOnly: boolean;
  /** Every address a host name resolves to; absent (Workers) = names are not resolved. */
  resolve?: (host: string) => Promise<string[]>;
  /** Milliseconds a request may take, its body included; default SSO_FETCH_TIMEOUT_MS. */
  timeoutMs?: number;
}

/** The rules of docs/sso.md "Addresses" from the configuration: private addresses as SSO_ALLOW_PRIVATE_URLS says, https only in production. */
export function ssoFetchPolicy(
  config: Pick<Config, 'sso' | 'webhooks'>,
  fetch: typeof globalThis.fetch,
  resolve?: SsoFetchPolicy['resolve'],
): SsoFetchPolicy {
  return { fetch, allowPrivateUrls: config.sso.allowPrivateUrls, httpsOnly: config.webhooks.httpsOnly, resolve };
}

export const SSO_FETCH_TIMEOUT_MS = 5_000;
/** Statuses whose answer has no body (the Response constructor refuses one). */
const NULL_BODY = new Set([101, 204, 205, 304]);
export const SSO_FETCH_MAX_BYTES = 256 * 1024;

/**
 * A request to an IdP that did not give a usable answer. The message names
 * the URL and what went wrong, never a request body (it carries the code and
 * the client's credentials) nor the answer's.
 */
export class SsoFetchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SsoFetchError';
  }
}

export interface SsoFetchInit {
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string | URLSearchParams;
}

/** The URL as the policy lets it through; throws SsoFetchError with the reason otherwise. */
export async function checkSsoUrl(raw: string, policy: SsoFetchPolicy): Promise<URL> {
  const verdict = await checkWebhookUrl(raw, {
    httpsOnly: policy.httpsOnly,
    allowPrivate: policy.allowPrivateUrls,
    resolve: policy.resolve,
  });
  if (!verdict.ok) throw new SsoFetchError(`${describe(raw)} ${verdict.reason}`);
  return verdict.url;
}

/** Origin and path only: enough to say which endpoint failed, no query string. */
function describe(raw: string): string {
  try {
    const url = new URL(raw);
    return `${url.origin}${url.pathname}`;
  } catch {
    return 'URL';
  }
}

/**
 * One checked request: the URL passes the policy, no redirect is followed,
 * the whole exchange ends within the timeout and the body is read up to the
 * cap. Answers a Response whose body is already in memory (any status but a
 * redirect: the caller decides what an error status means).
 */
export async function checkedFetch(raw: string, policy: SsoFetchPolicy, init: SsoFetchInit = {}): Promise<Response> {
  const url = await checkSsoUrl(raw, policy);
  const where = describe(raw);
  const signal = AbortSignal.timeout(policy.timeoutMs ?? SSO_FETCH_TIMEOUT_MS);
  try {
    const response = await policy.fetch(url, {
      method: init.method ?? 'GET',
      headers: init.headers,
      body: init.body,
      redirect: 'manual',
      signal,
    });
    // A browser-like fetch answers an opaque redirect (status 0); Node and Workers the 3xx itself.
    if (response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400)) {
      await response.body?.cancel();
      throw new SsoFetchError(`${where} answered a redirect, which is not followed`);
    }
    const bytes = await readCapped(response, where);
    // The body is decoded already: only its type is kept (a Content-Length or Content-Encoding would no longer hold).
    const headers = { 'content-type': response.headers.get('content-type') ?? 'application/octet-stream' };
    return new Response(NULL_BODY.has(response.status) ? null : bytes, { status: response.status, headers });
  } catch (error) {
    if (error instanceof SsoFetchError) throw error;
    if (signal.aborted) throw new SsoFetchError(`${where} did not answer in time`);
    throw new SsoFetchError(`${where} could not be reached`);
  }
}

async function readCapped(response: Response, where: string): Promise<Uint8Array<ArrayBuffer>> {
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > SSO_FETCH_MAX_BYTES) {
      await reader.cancel();
      throw new SsoFetchError(`${where} answered more than ${SSO_FETCH_MAX_BYTES} bytes`);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/** checkedFetch, then the body as JSON (an answer that is not JSON throws SsoFetchError). */
export async function checkedFetchJson(
  raw: string,
  policy: SsoFetchPolicy,
  init: SsoFetchInit = {},
): Promise<{ status: number; body: unknown }> {
  const response = await checkedFetch(raw, policy, {
    ...init,
    headers: { accept: 'application/json', ...init.headers },
  });
  try {
    return { status: response.status, body: JSON.parse(await response.text()) };
  } catch {
    throw new SsoFetchError(`${describe(raw)} answered ${response.status} without a JSON body`);
  }
}
