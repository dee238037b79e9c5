export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(event: string, fields?: LogFields): void;
  info(event: string, fields?: LogFields): void;
  warn(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  /** A logger whose every line also carries `fields` (the request id, say). */
  child(fields: LogFields): Logger;
}

/** Where finished lines go: stdout on Node and Workers, an array in tests. */
export type LogSink = (line: string, level: LogLevel) => void;

const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * Keys whose values never reach a log line, whatever the caller passes:
 * passwords, cookies, Authorization headers, tokens, keys and secrets.
 */
const SECRET_KEY =
  /pass(word)?|cookie|authorization|token|secret|^key$|apikey|api_key|keyhash|key_hash|salt|session_?id/i;

/** Field names repeat from line to line: each is tested against SECRET_KEY once (a bounded memo). */
const secretKeys = new Map<string, boolean>();
function isSecretKey(key: string): boolean {
  let secret = secretKeys.get(key);
  if (secret === undefined) {
    secret = SECRET_KEY.test(key);
    if (secretKeys.size < 4096) secretKeys.set(key, secret);
  }
  return secret;
}

function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((item) => redact(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const inner = (value as Record<string, unknown>)[key];
    out[key] = isSecretKey(key) ? '[redacted]' : redact(inner, depth + 1);
  }
  return out;
}

export const stdoutSink: LogSink = (line, level) => {
  if (level === 'error' || level === 'warn') console.error(line);
  else console.log(line);
};

export function createLogger(options: { sink?: LogSink; level?: LogLevel; base?: LogFields } = {}): Logger {
  const { sink = stdoutSink, level: minLevel = 'info', base = {} } = options;
  return buildLogger(sink, LEVELS[minLevel], base);
}

/**
 * One logger over a sink and its base fields. A child (one per request: the
 * request id) is just another of these, not a new createLogger; each line is
 * built as one object and redacted in place at its top level (a line's own
 * record, never the caller's), so the order and values of its fields are
 * those of `{ time, level, event, ...base, ...fields }`, redacted.
 */
function buildLogger(sink: LogSink, minLevel: number, base: LogFields): Logger {
  const write = (level: LogLevel, event: string, fields?: LogFields) => {
    if (LEVELS[level] < minLevel) return;
    const record: LogFields = { time: new Date().toISOString(), level, event, ...base, ...fields };
    for (const key in record) {
      record[key] = isSecretKey(key) ? '[redacted]' : redact(record[key], 1);
    }
    sink(JSON.stringify(record), level);
  };
  return {
    debug: (event, fields) => write('debug', event, fields),
    info: (event, fields) => write('info', event, fields),
    warn: (event, fields) => write('warn', event, fields),
    error: (event, fields) => write('error', event, fields),
    child: (fields) => buildLogger(sink, minLevel, { ...base, ...fields }),
  };
}

/** A logger that keeps its lines, for tests and for reading back what a request logged. */
export function createMemoryLogger(level: LogLevel = 'debug'): Logger & { lines: LogFields[] } {
  const lines: LogFields[] = [];
  const logger = createLogger({ level, sink: (line) => lines.push(JSON.parse(line) as LogFields) });
  return Object.assign(logger, { lines });
}
