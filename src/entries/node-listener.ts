import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ServerType } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context } from 'hono';
import {
  DEFAULT_CSP_HOSTS,
  type SecurityHeadersOptions,
  securityHeaderValues,
} from '../middleware/security-headers.js';
import { clientIpFromForwardedFor } from '../shared/client-address.js';

/**
 * Node's own limits for the listener. A request whose body never arrives in
 * full (a Content-Length larger than what is sent) is answered 408 after
 * `requestTimeout` instead of Node's default five minutes.
 */
export const LISTENER_OPTIONS = { requestTimeout: 30_000, headersTimeout: 15_000 } as const satisfies ServerOptions;

const REASONS: Record<number, [string, string]> = {
  400: ['Bad Request', 'Malformed HTTP request'],
  408: ['Request Timeout', 'The request was not received in time'],
  413: ['Payload Too Large', 'Request body exceeds 1048576 bytes'],
  431: ['Request Header Fields Too Large', 'Request header fields too large'],
};

function statusFor(code: string | undefined): number {
  if (code === 'HPE_HEADER_OVERFLOW') return 431;
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return 408;
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return 413;
  return 400;
}

/** The contract's error body (docs/api.md "Errors") as raw bytes, with the security headers and a fresh `X-Request-Id`. */
function errorHead(body: string, csp: SecurityHeadersOptions): Record<string, string | number> {
  return {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
    ...securityHeaderValues(csp),
    'X-Request-Id': crypto.randomUUID(),
    'Cache-Control': 'no-store',
    Connection: 'close',
  };
}

function contractBody(status: number, message: string): string {
  return JSON.stringify({
    code: status === 413 ? 'PAYLOAD_TOO_LARGE' : status >= 500 ? 'INTERNAL_ERROR' : 'VALIDATION_ERROR',
    message,
  });
}

/**
 * Requests the app never sees get the contract's error body (docs/api.md
 * "Errors"), the security headers (docs/api.md "Security headers": every
 * answer) and an
 * `X-Request-Id`, then the connection closes:
 * - what Node's HTTP parser refuses (both Content-Length and
 *   Transfer-Encoding, a header block over 16 KiB, bytes that are not HTTP, a
 *   body cut short), answered here instead of Node's empty 400;
 * - what the Node adapter refuses before calling the app (a Host that is not
 *   a host, a backslash in the path, a request target that is not a path),
 *   which it answers with an empty 400 (`writeHead(status)` without headers;
 *   every answer of the app carries headers, `X-Request-Id` at least);
 * - an HTTP/1.1 request without Host, which Node itself would answer with an
 *   empty 400 before any listener runs.
 */
export function answerClientErrors(
  server: ServerType | Server,
  { csp = DEFAULT_CSP_HOSTS }: { csp?: SecurityHeadersOptions } = {},
): void {
  const http1 = server as Server;
  http1.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (error.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const status = statusFor(error.code);
    const [reason, message] = REASONS[status]!;
    const body = contractBody(status, message);
    const head = Object.entries(errorHead(body, csp))
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    socket.end(`HTTP/1.1 ${status} ${reason}\r\n${head}\r\n${body}`);
  });

  // Node's own answer to a missing Host is an empty 400: this listener gives it instead.
  (http1 as Server & { requireHostHeader: boolean }).requireHostHeader = false;
  const appListeners = http1.listeners('request') as ((req: IncomingMessage, res: ServerResponse) => void)[];
  http1.removeAllListeners('request');
  http1.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.httpVersion === '1.1' && req.headers.host === undefined) {
      const body = contractBody(400, 'Missing Host header');
      res.writeHead(400, errorHead(body, csp)).end(body);
      return;
    }
    const writeHead = res.writeHead;
    res.writeHead = function adapterAnswer(this: ServerResponse, status: number, ...rest: unknown[]) {
      res.writeHead = writeHead;
      if (rest.length > 0 || status < 400)
        return (writeHead as (...args: unknown[]) => ServerResponse).call(this, status, ...rest);
      const body = contractBody(status, status === 400 ? 'Malformed request target or Host header' : 'Internal error');
      const end = res.end;
      res.end = function endWithBody(this: ServerResponse) {
        res.end = end;
        return (end as (chunk: string) => ServerResponse).call(this, body);
      } as ServerResponse['end'];
      return writeHead.call(this, status, errorHead(body, csp));
    } as ServerResponse['writeHead'];
    for (const listener of appListeners) listener.call(http1, req, res);
  });
}

/**
 * The client address on Node (docs/security.md "Client addresses", TRUSTED_PROXY_HOPS): the entry
 * `hops` from the right of X-Forwarded-For, or the socket's peer when `hops`
 * is 0 or the request carries no X-Forwarded-For.
 */
export function nodeClientIp(hops: number): (c: Context) => string | null {
  return (c) =>
    clientIpFromForwardedFor(c.req.header('x-forwarded-for'), hops) ?? getConnInfo(c).remote.address ?? null;
}
