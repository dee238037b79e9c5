/**
 * Webhook signing secrets (README "Webhooks"): `whsec_` + base64 of 24
 * random bytes, shown to the caller on creation and rotation only, and kept
 * at rest encrypted under AUTH_SECRET (AES-256-GCM, a key derived with
 * HKDF-SHA-256), so a read of the database alone cannot forge deliveries.
 * WebCrypto: the same code on Node and Workers.
 */
import { base64 } from '@better-auth/utils/base64';
import { type SecretBox, createSecretBox as sealedUnder } from '../shared/secret-box.js';

export type { SecretBox };

const PREFIX = 'whsec_';

export function generateWebhookSecret(): string {
  return `${PREFIX}${base64.encode(crypto.getRandomValues(new Uint8Array(24)))}`;
}

/** The HMAC key bytes of a `whsec_` secret (Standard Webhooks: base64 after the prefix). */
export function secretKeyBytes(secret: string): Uint8Array<ArrayBuffer> {
  return base64.decode(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret);
}

/** Webhook signing secrets at rest (the key derivation's label never changes: stored secrets depend on it). */
export function createSecretBox(authSecret: string): SecretBox {
  return sealedUnder(authSecret, 'gatehouse webhook secrets v1');
}
