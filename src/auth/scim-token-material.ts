import { randomBytes } from 'node:crypto';
import { hashKey, lookupDigest, randomBase62, safeEqual } from './api-key-material.js';

/** docs/scim.md: `scim_` + 40 base-62 characters, stored as API keys are (a salted hash and a lookup digest). */
export const SCIM_TOKEN_PREFIX = 'scim_' as const;
const TOKEN_PATTERN = /^scim_[0-9A-Za-z]{40}$/;

export interface ScimTokenMaterial {
  /** The plaintext: answered once by its creation, stored nowhere. */
  token: string;
  /** 16 random bytes, hex. */
  salt: string;
  /** HMAC-SHA256 of the token keyed by the salt, hex. */
  hash: string;
  /** SHA-256 of the token, hex: the index that finds the row. */
  lookupDigest: string;
}

export function generateScimToken(): ScimTokenMaterial {
  const token = `${SCIM_TOKEN_PREFIX}${randomBase62(40)}`;
  const salt = randomBytes(16).toString('hex');
  return { token, salt, hash: hashKey(token, salt), lookupDigest: lookupDigest(token) };
}

/** The exact shape of a token; anything else is refused before any database work. */
export function isWellFormedScimToken(value: string): boolean {
  return TOKEN_PATTERN.test(value);
}

/** Checks a presented token against a stored salt and hash in constant time. */
export function verifyScimToken(token: string, salt: string, storedHash: string): boolean {
  return safeEqual(hashKey(token, salt), storedHash);
}

export { lookupDigest as scimTokenDigest };
