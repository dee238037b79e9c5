/**
 * The Node deliverer's transport: a POST over node:http(s) whose connection
 * goes to an address checked at connect time. The URL policy resolves a host
 * name before each attempt, but fetch would resolve it again when it
 * connects; a name that answers a public address to the check and a private
 * one to the connection (DNS rebinding) would get through. Here the lookup
 * the socket uses is the policy's own: every address it answers must pass,
 * and the socket connects to one of those. TLS still verifies the host name.
 * Node only (server.ts); the Worker sends with fetch (Cloudflare's egress
 * reaches no private address).
 */
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import { isPrivateAddress, type UrlPolicy } from './url-policy.js';

/** Statuses whose answer has no body (the Response constructor refuses one). */
const NULL_BODY = new Set([101, 204, 205, 304]);

/** A request over the pinned transport: a body only where there is one (a GET sends no Content-Length). */
export type PinnedFetch = (
  url: URL,
  init: { method: string; headers: Record<string, string>; body?: string; signal: AbortSignal },
) => Promise<Response>;

export function pinnedFetch({
  resolve,
  allowPrivate = false,
}: {
  resolve: NonNullable<UrlPolicy['resolve']>;
  allowPrivate?: boolean;
}): PinnedFetch {
  const lookup: LookupFunction = (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const refused = allowPrivate ? undefined : addresses.find(isPrivateAddress);
        if (addresses.length === 0 || refused !== undefined) {
          const reason = refused ? `resolves to a private address (${refused})` : 'does not resolve';
          const error = Object.assign(new Error(`${hostname} ${reason}`), { code: 'EADDRNOTAVAIL' });
          return callback(error, '', 0);
        }
        const every = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        // A family the socket asks for (every address was checked either way).
        const entries =
          options.family === 4 || options.family === 6 ? every.filter((e) => e.family === options.family) : every;
        if (entries.length === 0) {
          const error = Object.assign(new Error(`${hostname} has no IPv${options.family} address`), {
            code: 'ENOTFOUND',
          });
          return callback(error, '', 0);
        }
        if (options.all) return (callback as (e: null, a: typeof entries) => void)(null, entries);
        callback(null, entries[0]!.address, entries[0]!.family);
      },
      (error: Error) => callback(error, '', 0),
    );
  };

  // Pools of their own: a kept-alive socket here was opened through this
  // lookup, never one that another part of the process resolved unchecked.
  const agents = {
    http: new HttpAgent({ keepAlive: true, lookup }),
    https: new HttpsAgent({ keepAlive: true, lookup }),
  };

  return (url, { method, headers, body, signal }) =>
    new Promise<Response>((resolvePromise, reject) => {
      const https = url.protocol === 'https:';
      const request = (https ? httpsRequest : httpRequest)(url, {
        method,
        headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent: https ? agents.https : agents.http,
        lookup,
        signal,
      });
      // Every error, also one after the answer began (an abort while its body is read): never an unhandled 'error'.
      request.on('error', reject);
      request.once('response', (response) => {
        response.on('error', () => {});
        const status = response.statusCode ?? 0;
        const answerHeaders = new Headers();
        for (const [name, value] of Object.entries(response.headers)) {
          for (const item of Array.isArray(value) ? value : value === undefined ? [] : [value]) {
            answerHeaders.append(name, item);
          }
        }
        if (NULL_BODY.has(status)) {
          response.resume();
          return resolvePromise(new Response(null, { status, headers: answerHeaders }));
        }
        resolvePromise(
          new Response(Readable.toWeb(response) as ReadableStream<Uint8Array>, { status, headers: answerHeaders }),
        );
      });
      request.end(body);
    });
}
