import type { Server, ServerOptions } from 'node:http';
import type { ServerType } from '@hono/node-server';
import type { Duplex } from 'node:stream';

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

/**
 * Requests Node's HTTP parser refuses before the app sees them (both
 * Content-Length and Transfer-Encoding, a header block over 16 KiB, bytes
 * that are not HTTP, a body cut short) get the contract's error body
 * (API.md "Errors") instead of Node's empty one, then the connection closes.
 */
export function answerClientErrors(server: ServerType | Server): void {
  (server as Server).on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (error.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const status = statusFor(error.code);
    const [reason, message] = REASONS[status]!;
    const body = JSON.stringify({ code: status === 413 ? 'PAYLOAD_TOO_LARGE' : 'VALIDATION_ERROR', message });
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
