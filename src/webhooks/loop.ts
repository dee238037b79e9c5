import type { DatabaseHandle } from '../db/client.js';
import { describeError } from '../shared/errors.js';
import type { Logger } from '../shared/logger.js';
import type { Deliverer } from './deliverer.js';

/** The channel migration 0008's trigger notifies when deliveries are written (sent at commit). */
export const WEBHOOK_CHANNEL = 'gatehouse_webhooks';
/** How often a Node instance looks for retries that have come due. */
export const POLL_INTERVAL_MS = 5_000;

export interface DeliveryLoop {
  /** Runs a round now (or right after the one running). */
  wake(): void;
  /** Claims nothing more and waits for the deliveries already claimed to be sent and recorded. */
  stop(): Promise<void>;
}

/**
 * A Node instance's deliverer: woken at commit by the database's
 * notification, and by a timer for retries (and for anything a lost
 * notification left behind). One round at a time; a wake during a round
 * nudges it (a round waiting on slow sends claims the new work now) and
 * runs another after it.
 */
export async function startDeliveryLoop({
  deliverer,
  database,
  logger,
  intervalMs = POLL_INTERVAL_MS,
}: {
  deliverer: Deliverer;
  database: DatabaseHandle;
  logger: Logger;
  intervalMs?: number;
}): Promise<DeliveryLoop> {
  let running: Promise<void> | null = null;
  let again = false;
  let stopped = false;

  const round = async () => {
    do {
      again = false;
      await deliverer
        .deliverDue()
        .catch((error) => logger.error('webhook.round_failed', { error: describeError(error) }));
    } while (again && !stopped);
  };

  const wake = () => {
    if (stopped) return;
    if (running) {
      again = true;
      deliverer.nudge();
      return;
    }
    running = round().finally(() => {
      running = null;
    });
  };

  await database.listen(WEBHOOK_CHANNEL, wake);
  const timer = setInterval(wake, intervalMs);
  timer.unref?.();
  wake();

  return {
    wake,
    async stop() {
      stopped = true;
      clearInterval(timer);
      deliverer.stop();
      await running;
    },
  };
}
