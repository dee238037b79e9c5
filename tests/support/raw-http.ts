/**
 * HTTP/1.1 over a raw socket: what a hostile client can send that fetch
 * never would (lying Content-Length, Content-Length with Transfer-Encoding,
 * raw bytes in the request line), and a parser for whatever comes back.
 */
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Writes `payload` and collects every byte until the server closes, or
 * `waitMs` passes. With `end`, the client half-closes after writing (the
 * server then knows no more bytes will come).
 */
export function rawExchange(
  port: number,
  payload: Buffer | string,
  options: { waitMs?: number; end?: boolean } = {},
): Promise<{ bytes: Buffer; closedByServer: boolean }> {
  const { waitMs = 3000, end = false } = options;
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let closedByServer = false;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ bytes: Buffer.concat(chunks), closedByServer });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => {
      closedByServer = true;
      finish();
    });
    socket.on('close', () => {
      closedByServer = true;
      finish();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNRESET' || error.code === 'EPIPE') {
        closedByServer = true;
        finish();
      } else reject(error);
    });
    socket.on('connect', () => {
      socket.write(payload);
      if (end) socket.end();
    });
  });
}

/** Every complete response in `bytes` (Content-Length or chunked bodies). */
export function parseResponses(bytes: Buffer): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = bytes;
  while (rest.length > 0) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd < 0) break;
    const [statusLine = '', ...lines] = rest.subarray(0, headEnd).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const index = line.indexOf(':');
      headers[line.slice(0, index).trim().toLowerCase()] = line.slice(index + 1).trim();
    }
    let bodyStart = headEnd + 4;
    let body: Buffer;
    if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
      const parts: Buffer[] = [];
      let offset = bodyStart;
      for (;;) {
        const lineEnd = rest.indexOf('\r\n', offset);
        if (lineEnd < 0) break;
        const size = parseInt(rest.subarray(offset, lineEnd).toString('latin1'), 16);
        offset = lineEnd + 2;
        if (!size) {
          offset += 2;
          break;
        }
        parts.push(rest.subarray(offset, offset + size));
        offset += size + 2;
      }
      body = Buffer.concat(parts);
      bodyStart = offset;
    } else {
      const length = Number(headers['content-length'] ?? 0);
      body = rest.subarray(bodyStart, bodyStart + length);
      bodyStart += length;
    }
    out.push({ status, headers, body: body.toString('utf8') });
    rest = rest.subarray(bodyStart);
  }
  return out;
}
