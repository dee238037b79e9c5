/**
 * TXT lookups on Cloudflare Workers, which have no resolver API. With servers
 * configured: DNS over TCP (RFC 1035 §4.2.2: each message behind a two-byte
 * length) through `connect()` of `cloudflare:sockets`, passed in by the
 * caller so this file loads on any runtime. Without: DNS over HTTPS, the
 * JSON form Cloudflare's resolver answers (`accept: application/dns-json`).
 * As on Node, no record, no name and no answer in time give `[]`; anything
 * else throws a DnsLookupError.
 */
import { DnsLookupError, type TxtResolver } from './dns-txt-types.js';

export { DnsLookupError, type TxtResolver } from './dns-txt-types.js';

/** The part of a `cloudflare:sockets` Socket used here. */
export interface TcpSocket {
  readable: ReadableStream<Uint8Array>;
  writable: WritableStream<Uint8Array>;
  close(): Promise<void>;
}
export type TcpConnect = (address: { hostname: string; port: number }) => TcpSocket;

export interface WorkerTxtResolverOptions {
  /** `connect` from `cloudflare:sockets`; required when servers are given. */
  connect?: TcpConnect;
  fetch?: typeof fetch;
  dohUrl?: string;
  /** Per-try timeout in milliseconds. */
  timeoutMs?: number;
  tries?: number;
}

const TXT = 16;
const IN = 1;
const NXDOMAIN = 3;
const TIMEOUT = Symbol('timeout');

/** The fields of a DoH JSON answer read here. */
interface DohAnswer {
  Status?: number;
  Answer?: { type?: number; data?: string }[];
}

/** A query of one TXT question with recursion desired (RFC 1035 §4.1), behind its TCP length prefix. */
export function encodeTxtQuery(id: number, name: string): Uint8Array {
  const labels = name.replace(/\.$/, '').split('.');
  if (labels.some((label) => label.length === 0 || label.length > 63 || !/^[\x21-\x7e]+$/.test(label)))
    throw new DnsLookupError('EBADNAME', name);
  const qname = labels.flatMap((label) => [label.length, ...[...label].map((c) => c.charCodeAt(0))]);
  const message = [id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, ...qname, 0, 0, TXT, 0, IN];
  return Uint8Array.from([message.length >> 8, message.length & 0xff, ...message]);
}

/** The TXT records of a response (without its length prefix), or null for NXDOMAIN. */
export function decodeTxtResponse(message: Uint8Array, id: number, name: string): string[] | null {
  const fail = (why: string): never => {
    throw new DnsLookupError(why, name);
  };
  const at = (i: number) => (i < message.length ? message[i]! : fail('EBADRESP'));
  const u16 = (i: number) => (at(i) << 8) | at(i + 1);
  if (message.length < 12 || u16(0) !== id || !(at(2) & 0x80)) fail('EBADRESP');
  const rcode = at(3) & 0x0f;
  if (rcode === NXDOMAIN) return null;
  if (rcode !== 0) fail(rcode === 2 ? 'ESERVFAIL' : rcode === 5 ? 'EREFUSED' : `ERCODE${rcode}`);
  /** Past a (possibly compressed, RFC 1035 §4.1.4) name starting at i. */
  const skipName = (i: number): number => {
    for (let length = at(i); length !== 0; length = at(i)) {
      if ((length & 0xc0) === 0xc0) return i + 2;
      i += length + 1;
    }
    return i + 1;
  };
  let offset = 12;
  for (let q = u16(4); q > 0; q--) offset = skipName(offset) + 4;
  const records: string[] = [];
  const decoder = new TextDecoder();
  for (let a = u16(6); a > 0; a--) {
    offset = skipName(offset);
    const [type, klass, length] = [u16(offset), u16(offset + 2), u16(offset + 8)];
    const end = offset + 10 + length;
    if (end > message.length) fail('EBADRESP');
    if (type === TXT && klass === IN) {
      const chunks: Uint8Array[] = [];
      for (let i = offset + 10; i < end; i += at(i) + 1) chunks.push(message.subarray(i + 1, i + 1 + at(i)));
      records.push(chunks.map((chunk) => decoder.decode(chunk)).join(''));
    }
    offset = end;
  }
  return records;
}

/** The text of a DoH JSON TXT `data`: its quoted character-strings joined, `\"` and `\DDD` unescaped. */
export function joinDohTxtData(data: string): string {
  const quoted = [...data.matchAll(/"((?:[^"\\]|\\.)*)"/g)];
  if (quoted.length === 0) return data;
  return quoted
    .map(([, inner]) =>
      (inner ?? '').replace(/\\(\d{3}|.)/g, (_, escaped: string) =>
        escaped.length === 3 ? String.fromCharCode(Number(escaped)) : escaped,
      ),
    )
    .join('');
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMEOUT> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<typeof TIMEOUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMEOUT), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** One question over one TCP connection: the response message, without its length prefix. */
async function askOverTcp(socket: TcpSocket, query: Uint8Array): Promise<Uint8Array> {
  const writer = socket.writable.getWriter();
  await writer.write(query);
  writer.releaseLock();
  const reader = socket.readable.getReader();
  let received = new Uint8Array(0);
  const expected = () => 2 + ((received[0]! << 8) | received[1]!);
  while (received.length < 2 || received.length < expected()) {
    const { value, done } = await reader.read();
    if (done) throw new Error('connection closed before the answer');
    received = Uint8Array.from([...received, ...value]);
  }
  return received.subarray(2, expected());
}

/** `ip:port` or `[v6]:port` (config.dns.servers' forms) as connect()'s address. */
function serverAddress(server: string): { hostname: string; port: number } {
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(server);
  return { hostname: match?.[1] ?? server, port: Number(match?.[2] ?? 53) };
}

/** A TxtResolver for the Worker: DNS over TCP to `servers` (`ip:port` / `[v6]:port`), else DoH JSON. */
export function createWorkerTxtResolver(
  servers: readonly string[] | null,
  options: WorkerTxtResolverOptions = {},
): TxtResolver {
  const timeoutMs = options.timeoutMs ?? 2000;
  const tries = options.tries ?? 2;
  const doFetch = options.fetch ?? ((input, init) => fetch(input, init));
  const dohUrl = options.dohUrl ?? 'https://cloudflare-dns.com/dns-query';
  const connect = options.connect;
  if (servers && servers.length > 0) {
    if (!connect) throw new Error('DNS_SERVERS on the Worker needs connect() from cloudflare:sockets');
    return async (name) => {
      let lastError: unknown = TIMEOUT;
      for (let attempt = 0; attempt < tries * servers.length; attempt++) {
        const id = Math.floor(Math.random() * 0x10000);
        const query = encodeTxtQuery(id, name);
        let socket: TcpSocket | undefined;
        try {
          socket = connect(serverAddress(servers[attempt % servers.length]!));
          const answer = await withTimeout(askOverTcp(socket, query), timeoutMs);
          if (answer === TIMEOUT) lastError = TIMEOUT;
          else return decodeTxtResponse(answer, id, name) ?? [];
        } catch (error) {
          if (error instanceof DnsLookupError) throw error;
          lastError = error;
        } finally {
          socket?.close().catch(() => {});
        }
      }
      if (lastError === TIMEOUT) return [];
      throw new DnsLookupError('ECONNREFUSED', name);
    };
  }
  return async (name) => {
    const url = `${dohUrl}?name=${encodeURIComponent(name)}&type=TXT`;
    const headers = { accept: 'application/dns-json' };
    let response: Response;
    try {
      response = await doFetch(url, { headers, signal: AbortSignal.timeout(timeoutMs * tries) });
    } catch (error) {
      if ((error as { name?: unknown }).name === 'TimeoutError') return [];
      throw new DnsLookupError('ECONNREFUSED', name);
    }
    if (!response.ok) throw new DnsLookupError(`EHTTP${response.status}`, name);
    const body = (await response.json().catch(() => null)) as DohAnswer | null;
    if (!body || typeof body.Status !== 'number') throw new DnsLookupError('EBADRESP', name);
    if (body.Status === NXDOMAIN) return [];
    if (body.Status !== 0) throw new DnsLookupError(`ERCODE${body.Status}`, name);
    return (body.Answer ?? [])
      .filter((answer) => answer.type === TXT && typeof answer.data === 'string')
      .map((answer) => joinDohTxtData(answer.data!));
  };
}
