/**
 * A client of a live service over real HTTP (loopback): the fault suite, the
 * e2e bench helpers, `npm run bench` and `npm run load` (tests/perf) share it.
 * In-process tests call `app.request` through ./http.ts instead; both send
 * what the SPA sends (JSON, its Origin, the jar's cookies).
 */
import { APP_ORIGIN, CookieJar, PASSWORD } from './http.js';

export { APP_ORIGIN, CookieJar, PASSWORD };

export interface Answer {
  status: number;
  /** The parsed JSON body; the text itself when it is not JSON; null when empty. */
  body: any;
  text: string;
  ms: number;
  path: string;
  method: string;
}

export interface LiveRequestOptions {
  method?: string;
  body?: unknown;
  jar?: CookieJar;
  timeoutMs?: number;
  headers?: Record<string, string>;
}

export interface LiveClient {
  /** e.g. http://127.0.0.1:3000 */
  base: string;
  request(path: string, options?: LiveRequestOptions): Promise<Answer>;
}

/**
 * Requests to `base`: JSON bodies, the SPA's Origin, the jar's cookies (and
 * Set-Cookie stored back), no redirects followed. `send` replaces `fetch`
 * (the bench counts SQL through `app.request` with the same client).
 */
export function liveClient(
  base: string,
  send: (url: string, init: RequestInit) => Response | Promise<Response> = fetch,
): LiveClient {
  return {
    base,
    async request(path, options = {}) {
      const { method = options.body === undefined ? 'GET' : 'POST', body, jar, timeoutMs = 30_000 } = options;
      const headers: Record<string, string> = { origin: APP_ORIGIN, ...options.headers };
      if (body !== undefined) headers['content-type'] ??= 'application/json';
      if (jar?.header()) headers.cookie = jar.header();
      const started = performance.now();
      const res = await send(`${base}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
        redirect: 'manual',
      });
      const text = await res.text();
      jar?.store(res);
      let parsed: any = null;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        parsed = text;
      }
      return { status: res.status, body: parsed, text, ms: performance.now() - started, path, method };
    },
  };
}

/** The answer's body when its status is `status`; otherwise an error naming `label`. */
export function expectStatus(label: string, answer: Answer, status: number): any {
  if (answer.status !== status) throw new Error(`${label}: ${answer.status} ${answer.text.slice(0, 300)}`);
  return answer.body;
}

/** A mail the service sent (its development mailer's log line, or a captured SMTP message). */
export interface Mail {
  to: string | string[];
  subject: string;
  text: string;
}

/** The link in the newest mail to `to` whose subject matches, waited for (the mail arrives after the answer). */
export async function mailedLink(
  mails: () => readonly Mail[],
  to: string,
  subject: RegExp,
  withinMs = 10_000,
): Promise<URL> {
  const deadline = performance.now() + withinMs;
  for (;;) {
    const mail = mails()
      .filter((m) => [m.to].flat().includes(to) && subject.test(m.subject))
      .at(-1);
    const link = mail && /https?:\/\/\S+/.exec(mail.text)?.[0];
    if (link) return new URL(link);
    if (performance.now() > deadline) throw new Error(`no mail ${subject} to ${to}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The path and query of a link, to request it from the same service. */
export const pathAndQuery = (url: URL) => `${url.pathname}${url.search}`;

export interface LiveUser {
  email: string;
  id: string;
  /** Holds the session the sign-in answered. */
  jar: CookieJar;
}

/** Sign-up, the mailed verification link, sign-in: a user with a live session. */
export async function signUpVerifySignIn(
  client: LiveClient,
  mails: () => readonly Mail[],
  options: { email?: string; label?: string } = {},
): Promise<LiveUser> {
  const label = options.label ?? 'user';
  const email = options.email ?? `${label}-${crypto.randomUUID().slice(0, 12)}@example.test`;
  expectStatus(
    'sign-up',
    await client.request('/api/auth/sign-up/email', { body: { email, password: PASSWORD, name: label } }),
    200,
  );
  const verified = await client.request(pathAndQuery(await mailedLink(mails, email, /verify/i)));
  if (verified.status !== 200 && verified.status !== 302)
    throw new Error(`verify: ${verified.status} ${verified.text.slice(0, 300)}`);
  const jar = new CookieJar();
  const signedIn = expectStatus(
    'sign-in',
    await client.request('/api/auth/sign-in/email', { body: { email, password: PASSWORD }, jar }),
    200,
  );
  return { email, id: signedIn.user.id as string, jar };
}
