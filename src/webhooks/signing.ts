import { createHMAC } from '@better-auth/utils/hmac';
import { secretKeyBytes } from './secrets.js';

const hmac = createHMAC('SHA-256', 'base64');

/**
 * Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 over
 * `<webhook-id>.<webhook-timestamp>.<body>`, keyed by the secret's bytes.
 */
export async function signDelivery(secret: string, id: string, timestamp: number, body: string): Promise<string> {
  const key = await hmac.importKey(secretKeyBytes(secret), 'sign');
  return `v1,${await hmac.sign(key, `${id}.${timestamp}.${body}`)}`;
}

/** The headers of one attempt (the same `webhook-id` on every retry of a delivery). */
export async function deliveryHeaders(secret: string, id: string, at: Date, body: string) {
  const timestamp = Math.floor(at.getTime() / 1000);
  return {
    'content-type': 'application/json',
    'user-agent': 'Gatehouse-Webhooks/1',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': await signDelivery(secret, id, timestamp, body),
  };
}
