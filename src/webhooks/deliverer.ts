import type { Kysely } from 'kysely';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { DB } from '../db/database.js';
import { type ClaimedDelivery, claimDue, settleAttempt } from '../db/queries/webhooks.js';
import { describeError } from '../errors.js';
import type { Logger } from '../logger.js';
import { createSecretBox, type SecretBox } from './secrets.js';
import { deliveryHeaders } from './signing.js';
import { checkWebhookUrl, type UrlPolicy, urlPolicyFor } from './url-policy.js';

/** API.md: a 2xx within 10 s succeeds. */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** An endpoint whose deliveries have all failed for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;
/** What a delivery's `lastError` keeps of a response body. */
const EXCERPT = 200;

/** The start of a response body, read no further than needed (a receiver's body may be large or endless). */
async function readExcerpt(response: Response): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let length = 0;
  try {
    while (length < EXCERPT) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      length += value.length;
    }
  } catch {
    // What arrived is enough to describe the failure.
  } finally {
    reader.cancel().catch(() => {});
  }
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return new TextDecoder().decode(bytes.slice(0, EXCERPT)).replace(/\uFFFD$/, '');
}

export interface DelivererOptions {
  db: Kysely<DB>;
  secrets: SecretBox;
  /** Seconds before each retry (WEBHOOK_RETRY_SCHEDULE); after the last, the delivery is failed. */
  retrySchedule: readonly number[];
  urlPolicy: UrlPolicy;
  logger: Logger;
  clock?: Clock;
  timeoutMs?: number;
  /** Deliveries in flight at once (and claimed per round): memory stays bounded whatever the backlog. */
  concurrency?: number;
}

export interface DeliveryRun {
  attempted: number;
  succeeded: number;
}

/**
 * Sends due deliveries at least once: claim a batch under a lease, send each
 * signed (Standard Webhooks), record the outcome, repeat until none is due.
 * Redirects are not followed (a 3xx is a failure); the URL is checked again
 * before each attempt (a name may have come to resolve to a private address).
 */
export function createDeliverer(options: DelivererOptions) {
  const { db, secrets, retrySchedule, urlPolicy, logger } = options;
  const clock = options.clock ?? (() => new Date());
  const timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  const concurrency = options.concurrency ?? 8;
  // A lease outlives the attempt (timeout + the time to record it): no other instance sends it meanwhile.
  const leaseMs = timeoutMs + 20_000;
  let stopped = false;
  // Stopping aborts the sends in flight: each is recorded as due again at once,
  // for whichever instance runs next. One controller per run: on Workers an
  // AbortSignal belongs to the request (or cron event) that made it.
  const runs = new Set<AbortController>();

  async function send(
    delivery: ClaimedDelivery,
    stopping: AbortSignal,
  ): Promise<{ statusCode: number | null; error: string | null; interrupted?: boolean }> {
    const verdict = await checkWebhookUrl(delivery.url, urlPolicy);
    if (!verdict.ok) return { statusCode: null, error: `URL refused: ${verdict.reason}` };
    const body = JSON.stringify(delivery.payload);
    // A secret sealed under another AUTH_SECRET cannot be opened: a failed
    // attempt like any other (it follows the schedule), not a claim that
    // never settles and comes back at every lease's end.
    const secret = await secrets.open(delivery.secret).catch(() => null);
    if (secret === null)
      return { statusCode: null, error: 'Signing secret unreadable (AUTH_SECRET changed?): rotate the secret' };
    try {
      const response = await fetch(verdict.url, {
        method: 'POST',
        headers: await deliveryHeaders(secret, delivery.id, clock(), body),
        body,
        redirect: 'manual',
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), stopping]),
      });
      if (response.status >= 200 && response.status < 300) {
        await response.body?.cancel();
        return { statusCode: response.status, error: null };
      }
      const excerpt = await readExcerpt(response);
      return {
        statusCode: response.status,
        error: `HTTP ${response.status}${excerpt ? `: ${excerpt}` : ''}`.slice(0, EXCERPT),
      };
    } catch (error) {
      if (stopping.aborted)
        return { statusCode: null, error: 'Interrupted: the instance was stopping', interrupted: true };
      const { name, message } = error instanceof Error ? error : { name: 'Error', message: String(error) };
      const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : '';
      return { statusCode: null, error: `${name}: ${message}${cause}`.slice(0, EXCERPT) };
    }
  }

  async function attempt(delivery: ClaimedDelivery, stopping: AbortSignal): Promise<boolean> {
    const { statusCode, error, interrupted } = await send(delivery, stopping);
    const now = clock();
    const succeeded = error === null;
    const delay = retrySchedule[delivery.attempts - 1];
    const failingFor = delivery.failing_since ? now.getTime() - new Date(delivery.failing_since).getTime() : 0;
    await settleAttempt(db, {
      id: delivery.id,
      endpointId: delivery.endpoint_id,
      succeeded,
      statusCode,
      error,
      retryAt: interrupted ? now : succeeded || delay === undefined ? null : new Date(now.getTime() + delay * 1000),
      now,
      // An interrupted send says nothing of the endpoint.
      endpointFailed: !succeeded && !interrupted,
      disable: !succeeded && !interrupted && failingFor >= DISABLE_AFTER_MS ? 'Every delivery failed for 5 days' : null,
    });
    logger[succeeded ? 'info' : 'warn']('webhook.delivery', {
      deliveryId: delivery.id,
      endpointId: delivery.endpoint_id,
      attempt: delivery.attempts,
      statusCode,
      ...(error ? { error } : {}),
    });
    return succeeded;
  }

  return {
    /**
     * Sends what is due, `concurrency` at a time: whenever fewer are in
     * flight, claims as many as there is room for; when none is due, waits
     * for a send to end (new events may have come meanwhile) and looks
     * again; returns when none is due and none is in flight, or once
     * `budgetMs` has passed (no new claim after it). Memory holds at most
     * `concurrency` deliveries, whatever the backlog.
     */
    async deliverDue({ budgetMs }: { budgetMs?: number } = {}): Promise<DeliveryRun> {
      const until = budgetMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + budgetMs;
      const run: DeliveryRun = { attempted: 0, succeeded: 0 };
      const stopping = new AbortController();
      runs.add(stopping);
      const inFlight = new Set<Promise<void>>();
      const start = (delivery: ClaimedDelivery) => {
        run.attempted += 1;
        const sending = attempt(delivery, stopping.signal)
          .then(
            (succeeded) => {
              if (succeeded) run.succeeded += 1;
            },
            (error: unknown) => {
              // The lease expires and the delivery is tried again: at least once.
              logger.error('webhook.delivery_failed', { deliveryId: delivery.id, error: describeError(error) });
            },
          )
          .finally(() => inFlight.delete(sending));
        inFlight.add(sending);
      };
      try {
        while (Date.now() < until && !stopped) {
          const room = concurrency - inFlight.size;
          if (room > 0) {
            const now = clock();
            const batch = await claimDue(db, { now, leaseUntil: new Date(now.getTime() + leaseMs), limit: room });
            for (const delivery of batch) start(delivery);
            if (batch.length > 0) continue;
            if (inFlight.size === 0) break;
          }
          await Promise.race(inFlight);
        }
        await Promise.all(inFlight);
      } finally {
        runs.delete(stopping);
      }
      return run;
    },
    /** Claims nothing more; deliveries already claimed are sent and recorded by the runs that hold them. */
    stop() {
      stopped = true;
      for (const run of runs) run.abort();
    },
  };
}

export type Deliverer = ReturnType<typeof createDeliverer>;

/** The deliverer the configuration describes (secrets under AUTH_SECRET, WEBHOOK_* settings). */
export function delivererFor(
  config: Config,
  deps: { db: Kysely<DB>; logger: Logger; clock?: Clock; resolve?: UrlPolicy['resolve'] },
): Deliverer {
  return createDeliverer({
    db: deps.db,
    logger: deps.logger,
    clock: deps.clock,
    secrets: createSecretBox(config.auth.secret),
    retrySchedule: config.webhooks.retrySchedule,
    urlPolicy: urlPolicyFor(config.webhooks, deps.resolve),
  });
}
