import { base64 } from '@better-auth/utils/base64';

const STORED = 'v1:';
const encoder = new TextEncoder();

export interface SecretBox {
  seal(secret: string): Promise<string>;
  open(stored: string): Promise<string>;
}

/**
 * Seals secrets kept at rest under AUTH_SECRET: AES-256-GCM with a key derived
 * by HKDF-SHA-256, one key per `purpose` (the HKDF info), so a secret sealed
 * for one purpose never opens as another's. WebCrypto: Node and Workers alike.
 */
export function createSecretBox(authSecret: string, purpose: string): SecretBox {
  const key = (async () => {
    const material = await crypto.subtle.importKey('raw', encoder.encode(authSecret), 'HKDF', false, ['deriveKey']);
    return crypto.subtle.deriveKey(
      { name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: encoder.encode(purpose) },
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
      if (!stored.startsWith(STORED)) throw new Error('sealed secret: unknown storage format');
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
