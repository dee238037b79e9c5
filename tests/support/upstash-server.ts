/**
 * A small HTTP server that speaks the Upstash Redis REST protocol in front of a
 * real redis-server, for tests only.
 *
 * Supported endpoints (all POST, JSON bodies, `Authorization: Bearer <token>`
 * or `?_token=<token>`):
 *   - `/`            one command, e.g. `["SET","k","v","EX","10"]`
 *                    -> 200 `{ result }`, or 400 `{ error }` for a redis error
 *   - `/pipeline`    an array of commands -> 200 `[{ result } | { error }, ...]`
 *   - `/multi-exec`  an array of commands run in MULTI/EXEC
 *                    -> 200 `[{ result } | { error }, ...]`, or 400 `{ error }`
 *                    when redis discards the transaction (EXECABORT)
 *
 * With the request header `Upstash-Encoding: base64` every string in a result
 * (recursively, inside arrays too) is base64 encoded, as @upstash/redis expects
 * by default. The one exception mirrors Upstash: a top-level *status* reply of
 * exactly `OK` is sent as the plain string "OK" (the client special-cases it
 * and never base64-decodes a top-level "OK"). Integers stay numbers, nil is
 * null. Errors are never encoded.
 *
 * Lua scripts: @upstash/ratelimit >= 2.1 sends scripts whose first line is the
 * shebang `#!lua flags=allow-key-locking`. Stock Redis 7 parses shebangs and
 * rejects that flag ("Unexpected flag in script shebang"), so EVAL / EVAL_RO /
 * SCRIPT LOAD drop the flag (and the whole shebang line when no other flag is
 * left: the line is blanked, not removed, so Lua line numbers in error messages
 * still match the client's script). The client calls EVALSHA with the SHA1 of
 * the ORIGINAL text, so we remember original-sha -> redis-sha for every script
 * we rewrote and translate EVALSHA / EVALSHA_RO / SCRIPT EXISTS. An EVALSHA with
 * a sha we never saw is passed to redis unchanged, which answers with its own
 * `NOSCRIPT No matching script...` error; @upstash/ratelimit then falls back to
 * EVAL with the full script (which fills the map). SCRIPT LOAD answers with the
 * sha of the original text, as Upstash would.
 *
 * The server talks RESP2 to redis directly (no client library) so that it can
 * tell status replies from bulk strings and pass bytes through exactly. Each
 * HTTP request borrows its own redis connection from a small pool, so a
 * pipeline or a MULTI/EXEC never interleaves with other requests. Commands that
 * would change a pooled connection's state (MULTI, WATCH, SELECT, SUBSCRIBE,
 * AUTH, ...) are refused with a 400 (transactions go through /multi-exec).
 * Not implemented: Upstash's path-style commands (`GET /set/k/v`), streaming
 * endpoints (/subscribe, /monitor) and read-your-writes sync tokens (the
 * `upstash-sync-token` header is ignored; one redis is always consistent).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';

export interface StartUpstashServerOptions {
  /** e.g. `redis://127.0.0.1:6379`, `redis://:password@host:6379/2` */
  redisUrl: string;
  /** the bearer token clients must send */
  token: string;
  /** 0 or omitted: an ephemeral port; the server listens on 127.0.0.1 */
  port?: number;
}

export interface UpstashServer {
  /** e.g. `http://127.0.0.1:41234` (no trailing slash) */
  url: string;
  token: string;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------
// RESP2
// ---------------------------------------------------------------------------

type Reply =
  | { t: 'simple'; v: Buffer }
  | { t: 'error'; v: string }
  | { t: 'int'; v: number }
  | { t: 'bulk'; v: Buffer }
  | { t: 'nil' }
  | { t: 'array'; v: Reply[] };

const CRLF = Buffer.from('\r\n');

function encodeCommand(args: readonly string[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.from(arg, 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, CRLF);
  }
  return Buffer.concat(parts);
}

/** Parses one reply starting at `start`; undefined when more bytes are needed. */
function parseReply(buf: Buffer, start: number): { reply: Reply; end: number } | undefined {
  if (start >= buf.length) return undefined;
  const lineEnd = buf.indexOf(CRLF, start);
  if (lineEnd === -1) return undefined;
  const type = String.fromCharCode(buf[start] as number);
  const line = buf.toString('utf8', start + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case '+':
      return { reply: { t: 'simple', v: Buffer.from(buf.subarray(start + 1, lineEnd)) }, end: next };
    case '-':
      return { reply: { t: 'error', v: line }, end: next };
    case ':':
      return { reply: { t: 'int', v: Number(line) }, end: next };
    case '$': {
      const len = Number.parseInt(line, 10);
      if (len < 0) return { reply: { t: 'nil' }, end: next };
      if (buf.length < next + len + 2) return undefined;
      return { reply: { t: 'bulk', v: Buffer.from(buf.subarray(next, next + len)) }, end: next + len + 2 };
    }
    case '*': {
      const count = Number.parseInt(line, 10);
      if (count < 0) return { reply: { t: 'nil' }, end: next };
      const items: Reply[] = [];
      let offset = next;
      for (let i = 0; i < count; i++) {
        const parsed = parseReply(buf, offset);
        if (!parsed) return undefined;
        items.push(parsed.reply);
        offset = parsed.end;
      }
      return { reply: { t: 'array', v: items }, end: offset };
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`);
  }
}

interface RedisTarget {
  host: string;
  port: number;
  username?: string;
  password?: string;
  db?: number;
}

function parseRedisUrl(redisUrl: string): RedisTarget {
  const url = new URL(redisUrl);
  if (url.protocol !== 'redis:') {
    throw new Error(`startUpstashServer: only redis:// URLs are supported, got ${redisUrl}`);
  }
  const target: RedisTarget = {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
    port: url.port ? Number(url.port) : 6379,
  };
  if (url.username) target.username = decodeURIComponent(url.username);
  if (url.password) target.password = decodeURIComponent(url.password);
  const db = url.pathname.replace(/^\//, '');
  if (db) {
    if (!/^\d+$/.test(db)) throw new Error(`startUpstashServer: bad database number in ${redisUrl}`);
    target.db = Number(db);
  }
  return target;
}

class RedisConnection {
  private buffer: Buffer = Buffer.alloc(0);
  private readonly pending: Array<{ resolve: (r: Reply) => void; reject: (e: Error) => void }> = [];
  broken = false;

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('redis connection closed')));
  }

  static async open(target: RedisTarget): Promise<RedisConnection> {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s = connect({ host: target.host, port: target.port });
      const onError = (err: Error) => reject(err);
      s.once('error', onError);
      s.once('connect', () => {
        s.off('error', onError);
        resolve(s);
      });
    });
    const conn = new RedisConnection(socket);
    const setup: string[][] = [];
    if (target.password !== undefined) {
      setup.push(target.username ? ['AUTH', target.username, target.password] : ['AUTH', target.password]);
    }
    if (target.db !== undefined) setup.push(['SELECT', String(target.db)]);
    if (setup.length > 0) {
      const replies = await conn.send(setup);
      const failed = replies.find((r) => r.t === 'error');
      if (failed && failed.t === 'error') {
        conn.destroy();
        throw new Error(`redis connection setup failed: ${failed.v}`);
      }
    }
    return conn;
  }

  /** Writes all commands at once (pipelined) and resolves with one reply each, in order. */
  send(commands: readonly (readonly string[])[]): Promise<Reply[]> {
    if (this.broken) return Promise.reject(new Error('redis connection is broken'));
    const promises = commands.map(
      () =>
        new Promise<Reply>((resolve, reject) => {
          this.pending.push({ resolve, reject });
        }),
    );
    this.socket.write(Buffer.concat(commands.map((c) => encodeCommand(c))));
    return Promise.all(promises);
  }

  destroy(): void {
    this.broken = true;
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    let offset = 0;
    try {
      for (;;) {
        const parsed = parseReply(this.buffer, offset);
        if (!parsed) break;
        offset = parsed.end;
        const waiter = this.pending.shift();
        if (!waiter) throw new Error('redis sent a reply nobody asked for');
        waiter.resolve(parsed.reply);
      }
    } catch (err) {
      this.fail(err instanceof Error ? err : new Error(String(err)));
      this.socket.destroy();
      return;
    }
    this.buffer = offset >= this.buffer.length ? Buffer.alloc(0) : this.buffer.subarray(offset);
  }

  private fail(err: Error): void {
    this.broken = true;
    for (const waiter of this.pending.splice(0)) waiter.reject(err);
  }
}

class RedisPool {
  private readonly idle: RedisConnection[] = [];
  private readonly all = new Set<RedisConnection>();
  private closed = false;

  constructor(
    private readonly target: RedisTarget,
    private readonly maxIdle = 8,
  ) {}

  async with<T>(fn: (conn: RedisConnection) => Promise<T>): Promise<T> {
    if (this.closed) throw new Error('upstash test server is closed');
    let conn = this.idle.pop();
    while (conn?.broken) {
      this.all.delete(conn);
      conn = this.idle.pop();
    }
    if (!conn) {
      conn = await RedisConnection.open(this.target);
      this.all.add(conn);
    }
    try {
      return await fn(conn);
    } finally {
      if (!conn.broken && !this.closed && this.idle.length < this.maxIdle) {
        this.idle.push(conn);
      } else {
        conn.destroy();
        this.all.delete(conn);
      }
    }
  }

  closeAll(): void {
    this.closed = true;
    for (const conn of this.all) conn.destroy();
    this.all.clear();
    this.idle.length = 0;
  }
}

// ---------------------------------------------------------------------------
// Lua script rewriting (see the header comment)
// ---------------------------------------------------------------------------

/** Shebang flags that Redis 7 does not know and rejects. */
const UNSUPPORTED_SCRIPT_FLAGS = new Set(['allow-key-locking']);

const sha1 = (text: string): string => createHash('sha1').update(text, 'utf8').digest('hex');

/** Returns the script with unsupported shebang flags removed (unchanged if none). */
export function stripUnsupportedShebang(script: string): string {
  if (!script.startsWith('#!')) return script;
  const nl = script.indexOf('\n');
  const firstLine = (nl === -1 ? script : script.slice(0, nl)).replace(/\r$/, '');
  const rest = nl === -1 ? '' : script.slice(nl); // keeps the newline: line numbers stay the same
  const tokens = firstLine.trim().split(/\s+/);
  if (tokens[0] !== '#!lua') return script; // let redis report whatever is wrong with it
  let removed = false;
  const kept: string[] = [];
  const otherTokens: string[] = [];
  for (const token of tokens.slice(1)) {
    if (token.startsWith('flags=')) {
      for (const flag of token.slice('flags='.length).split(',')) {
        if (flag === '') continue;
        if (UNSUPPORTED_SCRIPT_FLAGS.has(flag)) removed = true;
        else kept.push(flag);
      }
    } else {
      otherTokens.push(token);
    }
  }
  if (!removed) return script;
  // No flags left and nothing else on the line: drop the shebang so redis runs the
  // script with classic (pre-7) semantics, as Upstash does for these scripts.
  if (kept.length === 0 && otherTokens.length === 0) return rest;
  return ['#!lua', ...otherTokens, ...(kept.length ? [`flags=${kept.join(',')}`] : [])].join(' ') + rest;
}

class ScriptRegistry {
  /** sha1(original text) -> sha1(text redis actually got) */
  private readonly toRedis = new Map<string, string>();
  /** the reverse, to answer SCRIPT LOAD with the sha the client expects */
  private readonly toClient = new Map<string, string>();

  private register(original: string): string {
    const rewritten = stripUnsupportedShebang(original);
    if (rewritten !== original) {
      const clientSha = sha1(original);
      const redisSha = sha1(rewritten);
      this.toRedis.set(clientSha, redisSha);
      this.toClient.set(redisSha, clientSha);
    }
    return rewritten;
  }

  private mapSha(sha: string): string {
    return this.toRedis.get(sha.toLowerCase()) ?? sha;
  }

  /** Rewrites a command before it is sent to redis. */
  rewrite(args: string[]): string[] {
    const name = (args[0] ?? '').toUpperCase();
    if ((name === 'EVAL' || name === 'EVAL_RO') && args[1] !== undefined) {
      return [args[0] as string, this.register(args[1]), ...args.slice(2)];
    }
    if ((name === 'EVALSHA' || name === 'EVALSHA_RO') && args[1] !== undefined) {
      return [args[0] as string, this.mapSha(args[1]), ...args.slice(2)];
    }
    if (name === 'SCRIPT') {
      const sub = (args[1] ?? '').toUpperCase();
      if (sub === 'LOAD' && args[2] !== undefined) {
        return [args[0] as string, args[1] as string, this.register(args[2]), ...args.slice(3)];
      }
      if (sub === 'EXISTS') {
        return [args[0] as string, args[1] as string, ...args.slice(2).map((sha) => this.mapSha(sha))];
      }
    }
    return args;
  }

  /** Rewrites a reply after redis answered `args` (the original, un-rewritten command). */
  rewriteReply(args: readonly string[], reply: Reply): Reply {
    if ((args[0] ?? '').toUpperCase() === 'SCRIPT' && (args[1] ?? '').toUpperCase() === 'LOAD' && reply.t === 'bulk') {
      const clientSha = this.toClient.get(reply.v.toString('utf8'));
      if (clientSha) return { t: 'bulk', v: Buffer.from(clientSha) };
    }
    return reply;
  }
}

// ---------------------------------------------------------------------------
// Upstash JSON encoding
// ---------------------------------------------------------------------------

type Json = string | number | null | Json[];

function replyToJson(reply: Reply, base64: boolean, topLevel: boolean): Json {
  switch (reply.t) {
    case 'simple': {
      if (!base64) return reply.v.toString('utf8');
      // Upstash sends a top-level "OK" status as is; @upstash/redis relies on that
      // (it never base64-decodes a top-level "OK"). Everything else is encoded.
      if (topLevel && reply.v.toString('utf8') === 'OK') return 'OK';
      return reply.v.toString('base64');
    }
    case 'bulk':
      return base64 ? reply.v.toString('base64') : reply.v.toString('utf8');
    case 'int':
      return reply.v;
    case 'nil':
      return null;
    case 'array':
      return reply.v.map((item) => replyToJson(item, base64, false));
    case 'error':
      // An error nested inside an array (e.g. a Lua table holding an error reply):
      // Upstash has no way to express it, so it becomes its message.
      return base64 ? Buffer.from(reply.v, 'utf8').toString('base64') : reply.v;
  }
}

type ResultEntry = { result: Json } | { error: string };

function toEntry(reply: Reply, base64: boolean): ResultEntry {
  return reply.t === 'error' ? { error: reply.v } : { result: replyToJson(reply, base64, true) };
}

// ---------------------------------------------------------------------------
// Request validation
// ---------------------------------------------------------------------------

/**
 * Commands that would leave a pooled connection in a different state, or that
 * need a long-lived connection. Upstash refuses (most of) these over REST too;
 * transactions go through /multi-exec.
 */
const REFUSED_COMMANDS = new Set([
  'MULTI',
  'EXEC',
  'DISCARD',
  'WATCH',
  'UNWATCH',
  'SELECT',
  'AUTH',
  'HELLO',
  'QUIT',
  'RESET',
  'MONITOR',
  'SUBSCRIBE',
  'PSUBSCRIBE',
  'SSUBSCRIBE',
  'UNSUBSCRIBE',
  'PUNSUBSCRIBE',
  'SUNSUBSCRIBE',
  'CLIENT',
  'SHUTDOWN',
]);

class BadRequest extends Error {}

/** Turns one JSON command into redis arguments; throws BadRequest. */
function toCommand(raw: unknown): string[] {
  if (!Array.isArray(raw) || raw.length === 0) {
    throw new BadRequest('ERR a command must be a non-empty JSON array');
  }
  const args = raw.map((arg: unknown, i): string => {
    if (typeof arg === 'string') return arg;
    if (typeof arg === 'number' && Number.isFinite(arg)) return String(arg);
    if (typeof arg === 'boolean') return String(arg);
    throw new BadRequest(
      `ERR command argument ${i} must be a string, a number or a boolean, got ${JSON.stringify(arg)}`,
    );
  });
  const name = (args[0] as string).toUpperCase();
  if (REFUSED_COMMANDS.has(name)) {
    throw new BadRequest(
      `ERR Command is not allowed by the Upstash test server: ${name}` +
        (name === 'MULTI' || name === 'EXEC' ? ' (use the /multi-exec endpoint)' : ''),
    );
  }
  return args;
}

function toCommandList(raw: unknown): unknown[] {
  if (!Array.isArray(raw) || raw.length === 0) {
    throw new BadRequest('ERR the body must be a non-empty JSON array of commands');
  }
  return raw;
}

// ---------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------

const MAX_BODY_BYTES = 16 * 1024 * 1024;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BadRequest('ERR request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function tokenMatches(given: string | undefined, expected: Buffer): boolean {
  if (given === undefined) return false;
  const buf = Buffer.from(given, 'utf8');
  return buf.length === expected.length && timingSafeEqual(buf, expected);
}

export async function startUpstashServer(opts: StartUpstashServerOptions): Promise<UpstashServer> {
  if (!opts.token) throw new Error('startUpstashServer: token must not be empty');
  const target = parseRedisUrl(opts.redisUrl);
  const expectedToken = Buffer.from(opts.token, 'utf8');
  const pool = new RedisPool(target);
  const scripts = new ScriptRegistry();

  // Fail fast (and clearly) when redis is not there.
  try {
    const [pong] = await pool.with((conn) => conn.send([['PING']]));
    if (!pong || pong.t === 'error') throw new Error(pong ? pong.v : 'no reply');
  } catch (err) {
    pool.closeAll();
    throw new Error(`startUpstashServer: cannot reach redis at ${opts.redisUrl}: ${String(err)}`);
  }

  async function runSingle(raw: unknown, base64: boolean): Promise<[number, unknown]> {
    const args = toCommand(raw);
    const [reply] = await pool.with((conn) => conn.send([scripts.rewrite(args)]));
    if (!reply) throw new Error('no reply from redis');
    const entry = toEntry(scripts.rewriteReply(args, reply), base64);
    return ['error' in entry ? 400 : 200, entry];
  }

  async function runPipeline(raw: unknown, base64: boolean): Promise<[number, unknown]> {
    const list = toCommandList(raw);
    const entries: (ResultEntry | undefined)[] = [];
    const toSend: { index: number; args: string[] }[] = [];
    list.forEach((item, index) => {
      try {
        toSend.push({ index, args: toCommand(item) });
        entries.push(undefined);
      } catch (err) {
        if (!(err instanceof BadRequest)) throw err;
        entries.push({ error: err.message });
      }
    });
    if (toSend.length > 0) {
      const replies = await pool.with((conn) => conn.send(toSend.map((c) => scripts.rewrite(c.args))));
      toSend.forEach(({ index, args }, i) => {
        entries[index] = toEntry(scripts.rewriteReply(args, replies[i] as Reply), base64);
      });
    }
    return [200, entries];
  }

  async function runMultiExec(raw: unknown, base64: boolean): Promise<[number, unknown]> {
    const commands = toCommandList(raw).map((item) => toCommand(item));
    const replies = await pool.with((conn) =>
      conn.send([['MULTI'], ...commands.map((c) => scripts.rewrite(c)), ['EXEC']]),
    );
    const exec = replies[replies.length - 1];
    if (!exec) throw new Error('no reply from redis');
    if (exec.t === 'error') {
      // EXECABORT: say which queued command redis refused.
      const queued = replies.slice(1, -1);
      const firstBad = queued.findIndex((r) => r.t === 'error');
      const bad = queued[firstBad];
      const detail = bad && bad.t === 'error' ? ` (command ${firstBad + 1}: ${bad.v})` : '';
      return [400, { error: exec.v + detail }];
    }
    if (exec.t !== 'array') {
      return [400, { error: 'EXECABORT Transaction aborted' }];
    }
    return [200, exec.v.map((reply, i) => toEntry(scripts.rewriteReply(commands[i] ?? [], reply), base64))];
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const auth = req.headers.authorization;
    const bearer = auth?.startsWith('Bearer ') ? auth.slice('Bearer '.length).trim() : undefined;
    if (!tokenMatches(bearer ?? url.searchParams.get('_token') ?? undefined, expectedToken)) {
      sendJson(res, 401, { error: 'Unauthorized' });
      return;
    }
    if (req.method !== 'POST') {
      sendJson(res, 405, { error: 'ERR only POST is supported by the Upstash test server' });
      return;
    }
    const path = url.pathname.replace(/\/+$/, '');
    const handler =
      path === '' ? runSingle : path === '/pipeline' ? runPipeline : path === '/multi-exec' ? runMultiExec : undefined;
    if (!handler) {
      sendJson(res, 404, { error: `ERR unsupported endpoint ${url.pathname}` });
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req));
    } catch (err) {
      sendJson(res, 400, { error: err instanceof BadRequest ? err.message : 'ERR failed to parse JSON body' });
      return;
    }
    const encoding = req.headers['upstash-encoding'];
    const base64 = typeof encoding === 'string' && encoding.toLowerCase() === 'base64';
    try {
      const [status, payload] = await handler(body, base64);
      sendJson(res, status, payload);
    } catch (err) {
      if (err instanceof BadRequest) sendJson(res, 400, { error: err.message });
      else
        sendJson(res, 500, { error: `ERR Upstash test server: ${err instanceof Error ? err.message : String(err)}` });
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: `ERR Upstash test server: ${String(err)}` });
      else res.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    token: opts.token,
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((err) => {
          pool.closeAll();
          if (err) reject(err);
          else resolve();
        });
        // fetch() keeps connections alive; don't wait for them to time out.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
