import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** docs/api.md "API keys": `sk_live_` + 32 base-62 characters. */
export const KEY_PREFIX = 'sk_live_' as const;
export const KEY_RANDOM_LENGTH = 32;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = /^sk_live_[0-9A-Za-z]{32}$/;
/** 62 × 4: bytes at or above it would favour the first characters, so they are drawn again. */
const UNBIASED_LIMIT = 248;

/** 32 base-62 characters from the CSPRNG, by rejection sampling (no modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (byte < UNBIASED_LIMIT) out += ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export interface KeyMaterial {
  /** The plaintext: returned once in the creation response, stored nowhere. */
  key: string;
  lastFour: string;
  /** 16 random bytes, hex. */
  salt: string;
  /** HMAC-SHA256 of the full key, keyed by the salt, hex. */
  hash: string;
  /** SHA-256 of the full key, hex: the index that finds the row. */
  lookupDigest: string;
}

export function hashKey(key: string, salt: string): string {
  return createHmac('sha256', salt).update(key).digest('hex');
}

export function lookupDigest(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function generateKey(): KeyMaterial {
  const key = `${KEY_PREFIX}${randomBase62(KEY_RANDOM_LENGTH)}`;
  const salt = randomBytes(16).toString('hex');
  return { key, lastFour: key.slice(-4), salt, hash: hashKey(key, salt), lookupDigest: lookupDigest(key) };
}

/** True for a string that has the exact shape of a key; anything else is refused before any database work. */
export function isWellFormedKey(value: string): boolean {
  return KEY_PATTERN.test(value);
}

/** Constant-time equality of two secrets; false (never a throw) when lengths differ. */
export function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  if (left.length !== right.length) {
    // Compare against itself so the time spent does not depend on where they differ.
    timingSafeEqual(left, left);
    return false;
  }
  return timingSafeEqual(left, right);
}

/** Checks a presented key against a stored salt and hash in constant time. */
export function verifyKey(key: string, salt: string, storedHash: string): boolean {
  return safeEqual(hashKey(key, salt), storedHash);
}
