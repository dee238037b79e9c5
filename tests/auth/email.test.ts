/**
 * docs/api.md "Email": the mailer's three
 * modes. (a) development without EMAIL_API_KEY: one JSON log line per mail;
 * (b) production without it: an error log, nothing delivered; (c) with it:
 * the provider's HTTP API (Resend), here a local capture server over real HTTP.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMailer, EmailSendError } from '../../src/auth/email.js';
import { emails } from '../../src/auth/email-templates.js';
import { parseConfig } from '../../src/shared/config.js';
import { createLogger, createMemoryLogger } from '../../src/shared/logger.js';
import { createTestApp, TEST_SECRET, type TestApp } from '../support/app.js';
import { call, linkIn } from '../support/http.js';
import { PASSWORD, uniqueEmail } from '../support/users.js';

interface Captured {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

interface CaptureServer {
  url: string;
  requests: Captured[];
  /** What the next requests are answered with. */
  respond: { status: number; body: unknown };
  close(): Promise<void>;
}

/** A stand-in for the provider's API: records every request, answers as told. */
async function startCaptureServer(): Promise<CaptureServer> {
  const requests: Captured[] = [];
  const state: CaptureServer = {
    url: '',
    requests,
    respond: { status: 200, body: { id: 'x' } },
    close: async () => {},
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      requests.push({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
      });
      const payload = JSON.stringify(state.respond.body);
      res.writeHead(state.respond.status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
      });
      res.end(payload);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve, reject) => {
      server.closeAllConnections();
      server.close((error) => (error ? reject(error) : resolve()));
    });
  return state;
}

function configFor(env: Record<string, string>) {
  return parseConfig({ AUTH_SECRET: TEST_SECRET, RATE_LIMIT_ENABLED: 'false', ...env }).config;
}

const MESSAGE = () =>
  emails.verification(
    uniqueEmail('mail'),
    `http://localhost:4000/api/auth/verify-email?token=${crypto.randomUUID()}&callbackURL=%2F`,
  );

describe('mailer', () => {
  describe('(a) development without EMAIL_API_KEY', () => {
    it('writes each mail as one JSON line { level: info, event: email, to, subject, text } whose text holds the link', async () => {
      const written: string[] = [];
      const logger = createLogger({ sink: (line) => written.push(line) });
      const mailer = createMailer({ config: configFor({ NODE_ENV: 'development' }), logger });
      const message = MESSAGE();
      await mailer.send(message);

      expect(written).toHaveLength(1);
      const [line] = written;
      expect(line).not.toContain('\n');
      const parsed = JSON.parse(line!) as Record<string, unknown>;
      expect(parsed).toEqual({
        time: expect.any(String),
        level: 'info',
        event: 'email',
        to: message.to,
        subject: 'Verify your email address',
        text: message.text,
      });
      expect(linkIn(String(parsed.text))).toBe(message.text!.match(/https?:\/\/\S+/)![0]);
    });

    it('a mail with html only still logs its links in text', async () => {
      const logger = createMemoryLogger();
      const mailer = createMailer({ config: configFor({ NODE_ENV: 'development' }), logger });
      await mailer.send({
        to: 'html@example.test',
        subject: 'Links',
        html: '<p>Go <a href="https://app.example.test/a?b=1&amp;c=2">here</a></p>',
      });
      expect(logger.lines).toHaveLength(1);
      expect(String(logger.lines[0]!.text)).toContain('https://app.example.test/a?b=1');
    });
  });

  describe('(b) production without EMAIL_API_KEY', () => {
    it('logs email.not_delivered at error level and sends nothing', async () => {
      const capture = await startCaptureServer();
      try {
        const logger = createMemoryLogger();
        // EMAIL_API_URL points at the capture server: with no key, nothing may reach it.
        const config = configFor({
          NODE_ENV: 'production',
          DATABASE_URL: 'postgres://unused@127.0.0.1:1/none',
          EMAIL_API_URL: capture.url,
        });
        expect(config.email.apiKey).toBeNull();
        const mailer = createMailer({ config, logger });
        const message = MESSAGE();
        await mailer.send(message);
        expect(logger.lines).toEqual([
          {
            time: expect.any(String),
            level: 'error',
            event: 'email.not_delivered',
            to: message.to,
            subject: message.subject,
            reason: expect.any(String),
          },
        ]);
        // The content (and its link) is not logged: production logs are not a mail channel.
        expect(JSON.stringify(logger.lines)).not.toContain('verify-email');
        expect(capture.requests).toEqual([]);
      } finally {
        await capture.close();
      }
    });
  });

  describe('(c) with EMAIL_API_KEY: the provider over HTTP', () => {
    const API_KEY = `re_test_${crypto.randomUUID().replaceAll('-', '')}`;
    const FROM = 'Gatehouse Test <auth@gatehouse.example.test>';
    let capture: CaptureServer;
    let t: TestApp;

    beforeAll(async () => {
      capture = await startCaptureServer();
      t = await createTestApp({
        env: { EMAIL_API_KEY: API_KEY, EMAIL_API_URL: capture.url, EMAIL_FROM: FROM },
      });
    });
    afterAll(async () => {
      await t?.close();
      await capture?.close();
    });

    it('a sign-up sends the verification mail to the provider: POST /emails, Bearer key, from, to, subject, html and text with the link', async () => {
      capture.respond = { status: 200, body: { id: 'x' } };
      const email = uniqueEmail('provider');
      const before = capture.requests.length;
      const res = await call(t, '/api/auth/sign-up/email', {
        body: { email, password: PASSWORD, name: 'Provider User' },
      });
      expect(res.status).toBe(200);

      // The send may finish after the response (background delivery): wait for it.
      await vi.waitFor(() => expect(capture.requests.length).toBeGreaterThan(before), { timeout: 5000 });
      const sent = capture.requests.slice(before);
      expect(sent).toHaveLength(1);
      const [request] = sent;
      expect(request!.method).toBe('POST');
      expect(request!.path).toBe('/emails');
      expect(request!.headers.authorization).toBe(`Bearer ${API_KEY}`);
      expect(request!.headers['content-type']).toMatch(/application\/json/);
      const body = request!.body;
      expect(body.from).toBe(FROM);
      expect([body.to].flat()).toEqual([email]);
      expect(body.subject).toBe('Verify your email address');
      const link = linkIn(String(body.text));
      expect(link.startsWith(`${t.config.auth.url}/api/auth/verify-email?token=`)).toBe(true);
      expect(String(body.html)).toContain(link.replaceAll('&', '&#38;'));

      // No development log line: the mail went to the provider, not to stdout.
      expect(t.logger.lines.filter((line) => line.event === 'email')).toEqual([]);
      await vi.waitFor(
        () => expect(t.logger.lines.some((line) => line.event === 'email.sent' && line.to === email)).toBe(true),
        { timeout: 5000 },
      );

      // The link works.
      const verify = await call(t, new URL(link).pathname + new URL(link).search);
      expect([200, 302]).toContain(verify.status);
      const row = await t.db
        .selectFrom('users')
        .select('email_verified')
        .where('email', '=', email)
        .executeTakeFirstOrThrow();
      expect(row.email_verified).toBe(true);
    });

    for (const [status, body] of [
      [
        422,
        {
          statusCode: 422,
          name: 'validation_error',
          message: 'Invalid `to` field. The email address needs to follow the `email@example.com` format.',
        },
      ],
      [500, { statusCode: 500, name: 'application_error', message: 'Internal server error.' }],
    ] as const) {
      it(`provider answers ${status}: send rejects with EmailSendError, email.send_failed is logged once`, async () => {
        capture.respond = { status, body };
        const logger = createMemoryLogger();
        const mailer = createMailer({ config: t.config, logger });
        const message = MESSAGE();
        const before = capture.requests.length;

        const error = await mailer.send(message).then(
          () => null,
          (thrown: unknown) => thrown,
        );
        expect(error).toBeInstanceOf(EmailSendError);
        expect((error as Error).name).toBe('EmailSendError');
        expect(capture.requests.length - before).toBe(1);

        const failed = logger.lines.filter((line) => line.event === 'email.send_failed');
        expect(failed).toEqual([
          expect.objectContaining({
            level: 'error',
            to: message.to,
            subject: message.subject,
            reason: expect.stringContaining(body.name),
          }),
        ]);
        expect(failed[0]!.reason).toContain(body.message);
        expect(JSON.stringify(logger.lines)).not.toContain(API_KEY);
      });
    }

    it('an unreachable provider fails the same way', async () => {
      const logger = createMemoryLogger();
      const config = configFor({ NODE_ENV: 'test', EMAIL_API_KEY: API_KEY, EMAIL_API_URL: 'http://127.0.0.1:1' });
      const mailer = createMailer({ config, logger });
      await expect(mailer.send(MESSAGE())).rejects.toBeInstanceOf(EmailSendError);
      expect(logger.lines.map((line) => line.event)).toEqual(['email.send_failed']);
    });

    it('a sign-up whose mail fails: the library swallows the error (200), but the failure is logged', async () => {
      capture.respond = { status: 500, body: { statusCode: 500, name: 'application_error', message: 'down' } };
      const email = uniqueEmail('provider-down');
      const res = await call(t, '/api/auth/sign-up/email', { body: { email, password: PASSWORD, name: 'Down' } });
      // The send failure does not fail the sign-up (better-auth's runInBackgroundOrAwait catches; the send may also run after the response).
      expect(res.status).toBe(200);
      await vi.waitFor(
        () =>
          expect(
            t.logger.lines.some(
              (line) => line.event === 'email.send_failed' && line.to === email && line.level === 'error',
            ),
          ).toBe(true),
        { timeout: 5000 },
      );
      capture.respond = { status: 200, body: { id: 'x' } };
    });

    it('the API key never appears in any log line of the app', () => {
      expect(t.logger.lines.length).toBeGreaterThan(0);
      for (const line of t.logger.lines) expect(JSON.stringify(line)).not.toContain(API_KEY);
    });
  });
});
