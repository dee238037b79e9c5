import { expect } from 'vitest';
import type { TestApp } from './app.js';

export const APP_ORIGIN = 'http://localhost:3000';

/** Every test user's password (sign-ups hash it at production cost). */
export const PASSWORD = 'correct horse battery staple';

/** A browser's cookie store, reduced to what the tests need: name=value pairs, replaced and expired by Set-Cookie. */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  store(response: Response): void {
    for (const header of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = header.split(';');
      const index = pair.indexOf('=');
      const name = pair.slice(0, index).trim();
      const value = pair.slice(index + 1).trim();
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a)) || value === '';
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  get(name: string): string | undefined {
    return this.cookies.get(name);
  }

  names(): string[] {
    return [...this.cookies.keys()];
  }

  delete(name: string): void {
    this.cookies.delete(name);
  }

  header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  jar?: CookieJar;
  headers?: Record<string, string>;
  ip?: string;
}

/** One request through the app, as the SPA sends it: JSON, trusted Origin, the jar's cookies. */
export async function call(t: Pick<TestApp, 'app'>, path: string, options: RequestOptions = {}): Promise<Response> {
  const { method = options.body === undefined ? 'GET' : 'POST', body, jar, ip } = options;
  const headers: Record<string, string> = { origin: APP_ORIGIN, ...options.headers };
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  if (jar?.header()) headers.cookie = jar.header();
  if (ip) headers['x-forwarded-for'] = ip;
  const response = await t.app.request(path, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  jar?.store(response);
  return response;
}

/** The mails the development mailer logged (docs/api.md "Email"), newest last. */
export function mailsTo(t: Pick<TestApp, 'logger'>, to: string): { subject: string; text: string }[] {
  return t.logger.lines
    .filter((line) => line.event === 'email' && line.to === to)
    .map((line) => ({ subject: String(line.subject), text: String(line.text) }));
}

export function linkIn(text: string): string {
  const match = /https?:\/\/\S+/.exec(text);
  if (!match) throw new Error(`no link in mail: ${text}`);
  return match[0];
}

/** The path and query of a link, to request it through `app.request`. */
export function pathOf(link: string): string {
  const url = new URL(link);
  return `${url.pathname}${url.search}`;
}

/** A random (version 4) UUID: every id the service and the library issue, and every X-Request-Id. */
export const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The contract's error body (docs/api.md "Errors"). */
export interface ErrorBody {
  code: string;
  message: string;
  details?: { path: string; message: string }[];
}

/** Reads a JSON body once, with the status in the failure message when it is not the expected one. */
export async function expectStatus<T = any>(response: Response, status: number): Promise<T> {
  const text = await response.text();
  const body = text ? JSON.parse(text) : null;
  expect(response.status, `${response.status} ${text}`).toBe(status);
  return body as T;
}

/** An error answer with this status and code; its body. */
export async function expectError(response: Response, status: number, code: string): Promise<ErrorBody> {
  const body = await expectStatus<ErrorBody>(response, status);
  expect(body.code).toBe(code);
  return body;
}
