import type { Kysely } from 'kysely';
import type { Database } from '../db/database.js';
import { type ClaimedDelivery, claimDue, settleAttempt } from '../db/queries/webhook-deliveries.js';
import type { Clock } from '../shared/clock.js';
import type { Config } from '../shared/config.js';
import { describeError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import { createSecretBox, type SecretBox } from './secrets.js';
import { createSender, type WebhookFetch } from './send.js';
import { type UrlPolicy, urlPolicyFor } from './url-policy.js';

/** README "Webhooks": a 2xx within 10 s succeeds. */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** An endpoint whose deliveries have all failed for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;

export interface DelivererOptions {
  db: Kysely<Database>;
  secrets: SecretBox;
  /** Seconds before each retry (WEBHOOK_RETRY_SCHEDULE); after the last, the delivery is failed. */
  retrySchedule: readonly number[];
  urlPolicy: UrlPolicy;
  logger: Logger;
  clock?: Clock;
  /** The most an attempt takes, from the URL check to the end of reading the answer (default 10 s). */
  timeoutMs?: number;
  /** Deliveries in flight at once (and claimed per round): memory stays bounded whatever the backlog. */
  concurrency?: number;
  /**
   * The most deliveries of one organization leased at once, by every
   * instance together: the rest of `concurrency` stays for the others,
   * however slow or silent its endpoints are.
   */
  perOrganization?: number;
  /** How a delivery is sent (default: fetch); on Node, pinnedFetch connects only to checked addresses. */
  fetch?: WebhookFetch;
}

/** How long a lease outlasts the longest attempt: time to record its outcome. */
export const LEASE_MARGIN_MS = 20_000;

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
  const { db, retrySchedule, logger } = options;
  const clock = options.clock ?? (() => new Date());
  const timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  const send = createSender({ ...options, clock, timeoutMs });
  const concurrency = options.concurrency ?? 16;
  const perOrganization = Math.min(options.perOrganization ?? 4, concurrency);
  // Every attempt ends within timeoutMs (below), so a lease of timeout +
  // margin outlasts it: no other instance sends a delivery while it is in flight.
  const leaseMs = timeoutMs + LEASE_MARGIN_MS;
  let stopped = false;
  // Stopping aborts the sends in flight: each is recorded as due again at once,
  // for whichever instance runs next. One controller per run: on Workers an
  // AbortSignal belongs to the request (or cron event) that made it.
  const runs = new Set<AbortController>();
  // The runs in progress, to be told of new work (nudge): `nudged` is kept
  // until their next claim, so news that comes while they claim is not lost.
  const listeners = new Set<{ nudged: boolean; wake: () => void }>();

  async function attempt(delivery: ClaimedDelivery, stopping: AbortSignal): Promise<boolean> {
    const { statusCode, error, interrupted } = await send(delivery, stopping);
    const now = clock();
    const succeeded = error === null;
    const delay = retrySchedule[delivery.attempts - 1];
    const failingFor = delivery.failing_since ? now.getTime() - new Date(delivery.failing_since).getTime() : 0;
    const recorded = await settleAttempt(db, {
      id: delivery.id,
      leasedUntil: delivery.locked_until,
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
      // The lease ran out before the outcome was written (a stalled database): the new claim's outcome stands.
      ...(recorded ? {} : { leaseLost: true }),
    });
    return succeeded;
  }

  return {
    /**
     * Sends what is due, `concurrency` at a time and at most
     * `perOrganization` of one organization (across instances): whenever
     * fewer are in flight, claims as many as there is room for, taking the
     * organizations in turn; when none can be claimed, waits for a send to
     * end or for `nudge` (new events) and looks again; returns when none is
     * due and none is in flight, or once `budgetMs` has passed (no new claim
     * after it). Memory holds at most `concurrency` deliveries, whatever the
     * backlog.
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
      const news = { nudged: false, wake: () => {} };
      listeners.add(news);
      try {
        while (Date.now() < until && !stopped) {
          if (concurrency - inFlight.size > 0) {
            news.nudged = false;
            const now = clock();
            const batch = await claimDue(db, {
              now,
              leaseUntil: new Date(now.getTime() + leaseMs),
              limit: concurrency - inFlight.size,
              perOrganization,
            });
            for (const delivery of batch) start(delivery);
            if (batch.length > 0 || news.nudged) continue;
            if (inFlight.size === 0) break;
          }
          await Promise.race([
            ...inFlight,
            new Promise<void>((resolve) => {
              news.wake = resolve;
            }),
          ]);
        }
        await Promise.all(inFlight);
      } finally {
        listeners.delete(news);
        runs.delete(stopping);
      }
      return run;
    },
    /** New work may be due (an event written, a retry's time come): runs waiting on their sends look again now. */
    nudge() {
      for (const news of listeners) {
        news.nudged = true;
        news.wake();
      }
    },
    /** Claims nothing more; deliveries already claimed are sent and recorded by the runs that hold them. */
    stop() {
      stopped = true;
      for (const run of runs) run.abort();
      for (const news of listeners) news.wake();
    },
  };
}

export type Deliverer = ReturnType<typeof createDeliverer>;

/** The deliverer the configuration describes (secrets under AUTH_SECRET, WEBHOOK_* settings). */
export function delivererFor(
  config: Config,
  deps: {
    db: Kysely<Database>;
    logger: Logger;
    clock?: Clock;
    resolve?: UrlPolicy['resolve'];
    fetch?: WebhookFetch;
  } & Pick<DelivererOptions, 'concurrency' | 'perOrganization'>,
): Deliverer {
  return createDeliverer({
    db: deps.db,
    logger: deps.logger,
    clock: deps.clock,
    fetch: deps.fetch,
    concurrency: deps.concurrency,
    perOrganization: deps.perOrganization,
    secrets: createSecretBox(config.auth.secret),
    retrySchedule: config.webhooks.retrySchedule,
    urlPolicy: urlPolicyFor(config.webhooks, deps.resolve),
  });
}
