import { secretKeyBytes } from './secrets.js';

/**
 * Standard Webhooks signature: `v1,` + base64 HMAC-SHA256 over
 * `<webhook-id>.<webhook-timestamp>.<body>`, keyed by the secret's bytes.
 */
export async function signDelivery(secret: string, id: string, timestamp: number, body: string): Promise<string> {
  const key = await crypto.subtle.importKey('raw', secretKeyBytes(secret), { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  const mac = new Uint8Array(
    await crypto.subtle.sign('HMAC', key, new TextEncoder().encode(`${id}.${timestamp}.${body}`)),
  );
  return `v1,${btoa(String.fromCharCode(...mac))}`;
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
