import type { ClaimedDelivery } from '../db/queries/webhook-deliveries.js';
import type { Clock } from '../shared/clock.js';
import type { SecretBox } from './secrets.js';
import { deliveryHeaders } from './signing.js';
import { checkWebhookUrl, type UrlPolicy } from './url-policy.js';

/** What a delivery's `lastError` keeps of a response body. */
const EXCERPT = 200;

/** Settles when `signal` aborts (never rejects). */
const aborted = (signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });

/**
 * The start of a response body, read no further than needed (a receiver's
 * body may be large or endless) and no longer than the attempt's time.
 */
async function readExcerpt(response: Response, signal: AbortSignal): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return '';
  const chunks: Uint8Array[] = [];
  let length = 0;
  const stop = aborted(signal).then(() => ({ done: true, value: undefined }) as const);
  try {
    while (length < EXCERPT) {
      const { done, value } = await Promise.race([reader.read(), stop]);
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

/** The part of fetch the deliverer uses: a POST with a string body, redirects not followed. */
export type WebhookFetch = (
  url: URL,
  init: { method: 'POST'; headers: Record<string, string>; body: string; signal: AbortSignal },
) => Promise<Response>;

const fetchTransport: WebhookFetch = (url, init) => fetch(url, { ...init, redirect: 'manual' });

/** What a send reports: the receiver's status, or why there is none; `interrupted` when the instance stopped it. */
export interface SendResult {
  statusCode: number | null;
  error: string | null;
  interrupted?: boolean;
}

/**
 * One signed POST of a claimed delivery (Standard Webhooks), with the URL
 * checked again first (a name may have come to resolve to a private address).
 */
export function createSender(options: {
  secrets: SecretBox;
  urlPolicy: UrlPolicy;
  clock: Clock;
  timeoutMs: number;
  fetch?: WebhookFetch;
}) {
  const { secrets, urlPolicy, clock, timeoutMs, fetch: transport = fetchTransport } = options;

  /**
   * One attempt, over by `timeoutMs` whatever the receiver, the resolver or
   * the transport do: a timer this function owns aborts the send and ends
   * the wait. (Not AbortSignal.timeout combined with AbortSignal.any: on
   * Node 20 a garbage collection can take the timeout's signal before it
   * fires, and the send then waits for the HTTP client's own 300 s timeout.)
   */
  async function send(
    delivery: ClaimedDelivery,
    stopping: AbortSignal,
  ): Promise<{ statusCode: number | null; error: string | null; interrupted?: boolean }> {
    const controller = new AbortController();
    const timeout = new DOMException(`No answer within ${timeoutMs} ms`, 'TimeoutError');
    const timer = setTimeout(() => controller.abort(timeout), timeoutMs);
    const stop = () => controller.abort(new DOMException('The instance is stopping', 'AbortError'));
    if (stopping.aborted) stop();
    else stopping.addEventListener('abort', stop, { once: true });
    const ended = aborted(controller.signal).then(() => {
      throw controller.signal.reason;
    });
    ended.catch(() => {});
    try {
      return await Promise.race([exchange(delivery, controller.signal), ended]);
    } catch (error) {
      if (stopping.aborted)
        return { statusCode: null, error: 'Interrupted: the instance was stopping', interrupted: true };
      if (controller.signal.reason === timeout) return { statusCode: null, error: `TimeoutError: ${timeout.message}` };
      const { name, message } = error instanceof Error ? error : { name: 'Error', message: String(error) };
      const cause = error instanceof Error && error.cause instanceof Error ? ` (${error.cause.message})` : '';
      return { statusCode: null, error: `${name}: ${message}${cause}`.slice(0, EXCERPT) };
    } finally {
      clearTimeout(timer);
      stopping.removeEventListener('abort', stop);
    }
  }

  /** The URL check, the signed POST and its answer, under the attempt's signal. */
  async function exchange(
    delivery: ClaimedDelivery,
    signal: AbortSignal,
  ): Promise<{ statusCode: number | null; error: string | null }> {
    const verdict = await checkWebhookUrl(delivery.url, urlPolicy);
    if (!verdict.ok) return { statusCode: null, error: `URL refused: ${verdict.reason}` };
    const body = JSON.stringify(delivery.payload);
    // A secret sealed under another AUTH_SECRET cannot be opened: a failed
    // attempt like any other (it follows the schedule), not a claim that
    // never settles and comes back at every lease's end.
    const secret = await secrets.open(delivery.secret).catch(() => null);
    if (secret === null)
      return { statusCode: null, error: 'Signing secret unreadable (AUTH_SECRET changed?): rotate the secret' };
    const response = await transport(verdict.url, {
      method: 'POST',
      headers: await deliveryHeaders(secret, delivery.id, clock(), body),
      body,
      signal,
    });
    if (response.status >= 200 && response.status < 300) {
      response.body?.cancel().catch(() => {});
      return { statusCode: response.status, error: null };
    }
    const excerpt = await readExcerpt(response, signal);
    return {
      statusCode: response.status,
      error: `HTTP ${response.status}${excerpt ? `: ${excerpt}` : ''}`.slice(0, EXCERPT),
    };
  }

  return send;
}
