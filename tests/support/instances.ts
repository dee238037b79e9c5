import { type ChildProcess, spawn } from 'node:child_process';
import type { CookieJar } from './http.js';
import { eachLine, freePort } from './process.js';

/**
 * Instances of the real Node entry (`src/entries/server.ts` under tsx, as `npm start`
 * runs it), each a child process of its own, spoken to over HTTP as a client
 * speaks (Origin = APP_URL, a cookie jar, the mailed links read from its
 * development-email log lines): the two-instance suites of tests/integration.
 */

const ORIGIN = 'http://localhost:3000';
/** How long an instance may take to log server.listening (tsx compiles on a loaded machine). */
export const START_TIMEOUT_MS = 150_000;

export interface Answer {
  status: number;
  body: any;
  text: string;
  headers: Headers;
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  jar?: CookieJar;
  /** A raw Cookie header (replayed cookies of a jar that has since signed out). */
  cookie?: string;
  /** The client address (X-Forwarded-For); the suites give each user its own. */
  ip?: string;
  headers?: Record<string, string>;
}

export interface Instance {
  name: string;
  port: number;
  child: ChildProcess;
  /** Every JSON log line the process printed (stdout and stderr). */
  lines: Record<string, any>[];
  request(path: string, options?: RequestOptions): Promise<Answer>;
  stop(): Promise<void>;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `src/entries/server.ts` in a child process of its own; resolves once it logs server.listening. */
export async function startInstance(name: string, env: Record<string, string>): Promise<Instance> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/entries/server.ts'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, any>[] = [];
  const raw: string[] = [];
  eachLine(child, (line) => {
    try {
      lines.push(JSON.parse(line));
    } catch {
      raw.push(line);
    }
  });
  const started = Date.now();
  while (!lines.some((line) => line.event === 'server.listening')) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() - started > START_TIMEOUT_MS) {
      child.kill('SIGKILL');
      throw new Error(
        `instance ${name} did not start (exit ${child.exitCode}): ${JSON.stringify(lines.slice(-5))} ${raw.slice(-10).join('\n')}`,
      );
    }
    await sleep(100);
  }
  return {
    name,
    port,
    child,
    lines,
    async request(path, options = {}) {
      const { method = options.body === undefined ? 'GET' : 'POST', body, jar } = options;
      const headers: Record<string, string> = {
        origin: ORIGIN,
        'x-forwarded-for': options.ip ?? '192.0.2.10',
        ...options.headers,
      };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const cookie = options.cookie ?? jar?.header();
      if (cookie) headers.cookie = cookie;
      const response = await fetch(`http://127.0.0.1:${port}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: 'manual',
        signal: AbortSignal.timeout(30_000),
      });
      const text = await response.text();
      jar?.store(response);
      let parsed: any = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        // not JSON (a redirect's empty body, HTML): keep the text
      }
      return { status: response.status, body: parsed, text, headers: response.headers };
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
      }),
  };
}

/** The path and query of the link in the newest mail `via` logged to `email` whose subject matches. */
export async function mailedPath(via: Instance, email: string, subject: RegExp | string): Promise<string> {
  const matches = (value: unknown) => (typeof subject === 'string' ? value === subject : subject.test(String(value)));
  for (let i = 0; i < 200; i += 1) {
    const mail = via.lines
      .filter((line) => line.event === 'email' && line.to === email && matches(line.subject))
      .at(-1);
    const link = mail && /https?:\/\/\S+/.exec(String(mail.text))?.[0];
    if (link) {
      const url = new URL(link);
      return `${url.pathname}${url.search}`;
    }
    await sleep(50);
  }
  throw new Error(`${via.name} logged no mail "${subject}" to ${email}`);
}
