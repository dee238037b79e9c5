import { Resend } from 'resend';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';

/**
 * What a mail is for: each kind has its own hourly budget per recipient
 * (docs/security.md "Mail budgets", src/auth/mail-budget.ts); `other` is a
 * mail that names none.
 */
export type MailKind =
  | 'verification'
  | 'password_reset'
  | 'magic_link'
  | 'account_notice'
  | 'invitation'
  | 'security_notice'
  | 'other';

/** What a mail is (docs/api.md "Email"): to, subject, html and optional text. */
export interface EmailMessage {
  to: string;
  subject: string;
  html: string;
  text?: string;
  /** Never sent: it picks the budget the mail counts against. */
  kind?: MailKind;
}

export interface Mailer {
  send(message: EmailMessage): Promise<void>;
}

/** Raised when the provider refuses or cannot be reached, after `email.send_failed` is logged. */
export class EmailSendError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'EmailSendError';
  }
}

const RESEND_API_URL = 'https://api.resend.com';

/**
 * Three modes (docs/api.md "Email"): with EMAIL_API_KEY,
 * Resend; without it outside production, one JSON log line per mail whose
 * `text` holds every link; without it in production, an error log and no
 * delivery.
 */
export function createMailer({ config, logger }: { config: Config; logger: Logger }): Mailer {
  const { apiKey, apiUrl, from } = config.email;

  if (apiKey) {
    const resend = new Resend(apiKey, { baseUrl: apiUrl ?? RESEND_API_URL });
    return {
      async send({ to, subject, html, text }) {
        let reason: string | null = null;
        let cause: unknown;
        try {
          // The SDK answers `{ error }` instead of throwing for refused sends.
          const { error } = await resend.emails.send({ from, to, subject, html, ...(text ? { text } : {}) });
          if (error) reason = `${error.name}: ${error.message}`;
        } catch (thrown) {
          cause = thrown;
          reason = thrown instanceof Error ? thrown.message : String(thrown);
        }
        if (reason !== null) {
          // The failure is told once, here; the caller decides what else it means (EmailSendError).
          logger.error('email.send_failed', { to, subject, reason });
          throw new EmailSendError(`Email to ${to} could not be sent`, { cause });
        }
        logger.info('email.sent', { to, subject });
      },
    };
  }

  if (config.env !== 'production') {
    return {
      async send({ to, subject, html, text }) {
        logger.info('email', { to, subject, text: text ?? htmlToText(html) });
      },
    };
  }

  return {
    async send({ to, subject }) {
      logger.error('email.not_delivered', { to, subject, reason: 'EMAIL_API_KEY is not set' });
    },
  };
}

function htmlToText(html: string): string {
  return html
    .replace(/<a\s[^>]*href="([^"]*)"[^>]*>(.*?)<\/a>/gi, '$2 ($1)')
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}
