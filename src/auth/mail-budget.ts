import type { RateLimitStore, RateLimitTier } from '../platform/rate-limit-store.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import type { EmailMessage, Mailer, MailKind } from './email.js';
import { canonicalEmail } from './email-address.js';
import { escapeHtml } from './email-templates.js';

/**
 * docs/security.md "Mail budgets": how many mails one address receives,
 * whoever asks for them and from however many client addresses. Counted in
 * the rate-limit store (fixed windows aligned to the epoch: clock hours, UTC
 * days), so every instance and every Worker shares them:
 *
 * - of one kind (verification, password reset, magic link, account notice,
 *   invitation): at most `perHour` an hour;
 * - of all those kinds together: at most `perDay` a day;
 * - security notices are never dropped: the first `perHour` of an hour go
 *   out one by one, and the ones after are folded into one digest per
 *   address, sent COALESCE_MS after the first of them (see `coalesce`).
 *
 * A mail over budget is not sent and its sender is told nothing: the request
 * answers as if it had been (the wait a send takes included, see
 * `sendDuration`). A unit is spent only for a mail handed to the provider: a
 * refusal by one window gives back the unit the other counted, and a send
 * that fails gives back both.
 */

/** Hour and day, in seconds. */
const HOUR = 3600;
const DAY = 86_400;

/**
 * How long the first security notice over budget waits for others to join
 * its digest: under the 30 s a Worker may keep working after the response
 * (`waitUntil`), so the digest goes out on every runtime.
 */
export const COALESCE_MS = 20_000;

export interface MailBudgetOptions {
  store: RateLimitStore;
  config: Config;
  logger: Logger;
  /** Keeps work alive after the response (Workers: `ctx.waitUntil`). */
  background?: (task: Promise<unknown>) => void;
  /** The digest's wait (tests shorten it). */
  coalesceMs?: number;
}

/**
 * The recipient as the budget knows it, never in clear: a keyed hash (HMAC
 * under AUTH_SECRET) of the address in its canonical form (the one the
 * service compares addresses in). Sub-addresses (`kate+1@…`) are budgets of
 * their own: many providers deliver them to one mailbox, but whether they do
 * is the provider's rule, and folding them would make every `+tag` address
 * of a domain share one budget.
 */
export async function recipientKey(secret: string | CryptoKey, address: string): Promise<string> {
  const mailbox = canonicalEmail(address);
  const encoder = new TextEncoder();
  const key = typeof secret === 'string' ? await hmacKey(secret) : secret;
  const mac = new Uint8Array(
    await crypto.subtle.sign('HMAC', key, encoder.encode(`gatehouse mail budget\0${mailbox}`)),
  );
  return Array.from(mac.subarray(0, 16), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

function hmacKey(secret: string): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', new TextEncoder().encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Wraps the mailer once: every mail of the service goes through here (src/app.ts). */
export function budgetedMailer(mailer: Mailer, options: MailBudgetOptions): Mailer {
  const { store, config, logger, background = (task) => void task } = options;
  const coalesceMs = options.coalesceMs ?? COALESCE_MS;
  const { perHour, perDay } = config.email.budget;
  const hourTier: RateLimitTier = { name: 'mail', limit: perHour, window: HOUR };
  const dayTier: RateLimitTier = { name: 'mail', limit: perDay, window: DAY };
  // One warning per address, kind and window: the first refusal of a window claims it.
  const warnHourTier: RateLimitTier = { name: 'mail', limit: 1, window: HOUR };
  const warnDayTier: RateLimitTier = { name: 'mail', limit: 1, window: DAY };
  let key: Promise<CryptoKey> | undefined;
  const keyOf = async (address: string) => {
    key ??= hmacKey(config.auth.secret);
    return recipientKey(await key, address);
  };

  /**
   * A moving average of how long the provider takes to accept a mail, in
   * this instance: a refused mail waits as long before its caller goes on,
   * so that an answer that waits for its mail (sign-up, magic link) takes
   * about as long whether the mail went out or not.
   */
  let sendDuration = 0;
  const timedSend = async (message: EmailMessage) => {
    const started = performance.now();
    try {
      await mailer.send(message);
    } finally {
      const took = performance.now() - started;
      sendDuration = sendDuration === 0 ? took : sendDuration * 0.8 + took * 0.2;
    }
  };

  const warnOnce = (recipient: string, kind: MailKind, window: 'hour' | 'day') =>
    background(
      (async () => {
        const tier = window === 'hour' ? warnHourTier : warnDayTier;
        // Per kind an hour (each kind has its own hourly budget), per address a day.
        const decision = await store.limit(
          tier,
          window === 'hour' ? `warned:hour:${kind}:${recipient}` : `warned:day:${recipient}`,
        );
        if (!decision.success) return;
        logger.warn('mail.budget_exceeded', {
          recipient,
          kind,
          window,
          until: new Date(decision.reset).toISOString(),
        });
      })().catch(() => {}),
    );

  const giveBack = (tier: RateLimitTier, identifier: string, reset: number) =>
    background(
      store.refund(tier, identifier, reset).catch((error: unknown) => {
        logger.error('mail.budget_refund_failed', { error: String((error as Error)?.message ?? error) });
      }),
    );

  /** Security notices over budget, per recipient, waiting for their digest. */
  const digests = new Map<string, { to: string; messages: EmailMessage[] }>();

  const coalesce = (recipient: string, message: EmailMessage) => {
    const held = digests.get(recipient);
    if (held) {
      held.messages.push(message);
      return;
    }
    const digest = { to: message.to, messages: [message] };
    digests.set(recipient, digest);
    background(
      (async () => {
        await sleep(coalesceMs);
        digests.delete(recipient);
        // A failed send has been logged by the mailer (email.send_failed).
        await timedSend(digestMail(digest.to, digest.messages)).catch(() => {});
      })(),
    );
  };

  const sendNotice = async (message: EmailMessage) => {
    const recipient = await keyOf(message.to);
    let within: boolean;
    try {
      within = (await store.limit(hourTier, `hour:security_notice:${recipient}`)).success;
    } catch (error) {
      // The store does not answer: the notice goes out (it is never dropped).
      logger.error('mail.budget_unavailable', {
        kind: 'security_notice',
        error: String((error as Error)?.message ?? error),
      });
      within = true;
    }
    if (within) return timedSend(message);
    warnOnce(recipient, 'security_notice', 'hour');
    coalesce(recipient, message);
  };

  return {
    async send(message) {
      const kind = message.kind ?? 'other';
      if (kind === 'security_notice') return sendNotice(message);
      let recipient: string;
      let hour: Awaited<ReturnType<RateLimitStore['limit']>>;
      let day: Awaited<ReturnType<RateLimitStore['limit']>>;
      const hourId = (key: string) => `hour:${kind}:${key}`;
      const dayId = (key: string) => `day:${key}`;
      try {
        recipient = await keyOf(message.to);
        // Both windows at once: one round trip to the store whatever the outcome.
        [hour, day] = await Promise.all([
          store.limit(hourTier, hourId(recipient)),
          store.limit(dayTier, dayId(recipient)),
        ]);
      } catch (error) {
        // Like the global tier: a store that does not answer fails open with
        // an error log (the auth tier in front of every mailing route fails
        // closed, so the flood this budget stops cannot pass it either).
        logger.error('mail.budget_unavailable', { kind, error: String((error as Error)?.message ?? error) });
        return timedSend(message);
      }
      if (hour.success && day.success) {
        try {
          return await timedSend(message);
        } catch (error) {
          // Not sent: nothing spent.
          giveBack(hourTier, hourId(recipient), hour.reset);
          giveBack(dayTier, dayId(recipient), day.reset);
          throw error;
        }
      }
      if (hour.success) giveBack(hourTier, hourId(recipient), hour.reset);
      else warnOnce(recipient, kind, 'hour');
      if (day.success) giveBack(dayTier, dayId(recipient), day.reset);
      else warnOnce(recipient, kind, 'day');
      await sleep(sendDuration);
    },
  };
}

/** One mail for the security notices of a digest, each in full, oldest first. */
export function digestMail(to: string, messages: EmailMessage[]): EmailMessage {
  if (messages.length === 1) return messages[0]!;
  const subject = `${messages.length} changes were made to your account`;
  const intro = `${messages.length} security-relevant changes were made to your account in a short time; each is described below.`;
  return {
    to,
    kind: 'security_notice',
    subject,
    text: [intro, ...messages.map((m, i) => `${i + 1}. ${m.subject}\n\n${m.text ?? ''}`)].join('\n\n---\n\n'),
    html: [
      `<p>${escapeHtml(intro)}</p>`,
      ...messages.map((m, i) => `<hr><h3>${i + 1}. ${escapeHtml(m.subject)}</h3>${m.html}`),
    ].join(''),
  };
}
