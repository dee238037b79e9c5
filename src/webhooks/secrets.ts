/**
 * Webhook signing secrets (README "Webhooks"): `whsec_` + base64 of 24
 * random bytes, shown to the caller on creation and rotation only, and kept
 * at rest encrypted under AUTH_SECRET (AES-256-GCM, a key derived with
 * HKDF-SHA-256), so a read of the database alone cannot forge deliveries.
 * WebCrypto: the same code on Node and Workers.
 */
import { base64 } from '@better-auth/utils/base64';

const PREFIX = 'whsec_';
const STORED = 'v1:';
const encoder = new TextEncoder();

export function generateWebhookSecret(): string {
  return `${PREFIX}${base64.encode(crypto.getRandomValues(new Uint8Array(24)))}`;
}

/** The HMAC key bytes of a `whsec_` secret (Standard Webhooks: base64 after the prefix). */
export function secretKeyBytes(secret: string): Uint8Array<ArrayBuffer> {
  return base64.decode(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret);
}

export interface SecretBox {
  seal(secret: string): Promise<string>;
  open(stored: string): Promise<string>;
}

export function createSecretBox(authSecret: string): SecretBox {
  const key = (async () => {
    const material = await crypto.subtle.importKey('raw', encoder.encode(authSecret), 'HKDF', false, ['deriveKey']);
    return crypto.subtle.deriveKey(
      { name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: encoder.encode('gatehouse webhook secrets v1') },
      material,
      { name: 'AES-GCM', length: 256 },
      false,
      ['encrypt', 'decrypt'],
    );
  })();
  return {
    async seal(secret) {
      const iv = crypto.getRandomValues(new Uint8Array(12));
      const sealed = new Uint8Array(
        await crypto.subtle.encrypt({ name: 'AES-GCM', iv }, await key, encoder.encode(secret)),
      );
      const out = new Uint8Array(iv.length + sealed.length);
      out.set(iv);
      out.set(sealed, iv.length);
      return `${STORED}${base64.encode(out)}`;
    },
    async open(stored) {
      if (!stored.startsWith(STORED)) throw new Error('webhook secret: unknown storage format');
      const bytes = base64.decode(stored.slice(STORED.length));
      const plain = await crypto.subtle.decrypt(
        { name: 'AES-GCM', iv: bytes.slice(0, 12) },
        await key,
        bytes.slice(12),
      );
      return new TextDecoder().decode(plain);
    },
  };
}
