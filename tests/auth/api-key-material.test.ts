import { createHash, createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  generateKey,
  hashKey,
  isWellFormedKey,
  KEY_PREFIX,
  KEY_RANDOM_LENGTH,
  lookupDigest,
  randomBase62,
  safeEqual,
  verifyKey,
} from '../../src/auth/api-key-material.js';

/** docs/api.md "API keys": the format (32 base-62 characters), HMAC-SHA256 keyed by a 16-byte hex salt. */

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY = /^sk_live_[0-9A-Za-z]{32}$/;

/** Symbol counts over `text`, in alphabet order. */
function histogram(text: string): number[] {
  const counts = new Array<number>(62).fill(0);
  for (const char of text) {
    const index = ALPHABET.indexOf(char);
    if (index < 0) throw new Error(`not base-62: ${JSON.stringify(char)}`);
    counts[index]! += 1;
  }
  return counts;
}

/** Pearson's chi-square statistic of `counts` against the uniform distribution. */
function chiSquare(counts: number[]): number {
  const total = counts.reduce((a, b) => a + b, 0);
  const expected = total / counts.length;
  return counts.reduce((sum, n) => sum + (n - expected) ** 2 / expected, 0);
}

/** How much more often the first 8 symbols come up than the other 54 (1 when unbiased; 1.25 for `byte % 62`). */
function headRatio(counts: number[]): number {
  const head = counts.slice(0, 8).reduce((a, b) => a + b, 0) / 8;
  const tail = counts.slice(8).reduce((a, b) => a + b, 0) / 54;
  return head / tail;
}

/** What the generator must not be: a byte per symbol, reduced modulo 62 (256 = 4 * 62 + 8). */
function moduloBiased(length: number): string {
  return Array.from(randomBytes(length), (byte) => ALPHABET[byte % 62]).join('');
}

// 200,000 symbols: ~3,226 per symbol. Under uniformity the statistic (61 degrees
// of freedom) has mean 61 and standard deviation ~11, so 200 is ~12 sd away and
// never flakes; `byte % 62` scores ~1,300 at this size. Likewise the head ratio
// is 1 +- ~0.007 when unbiased against 1.25 for the modulo generator.
const SAMPLE_CHUNKS = 20;
const CHUNK = 10_000;
const CHI_SQUARE_BOUND = 200;
const HEAD_RATIO_BOUND = 1.06;

describe('randomBase62', () => {
  it('returns exactly the requested number of base-62 characters', () => {
    for (const length of [0, 1, 7, 32, 33, 1000]) {
      const value = randomBase62(length);
      expect(value).toHaveLength(length);
      expect(value).toMatch(/^[0-9A-Za-z]*$/);
    }
  });

  it('covers all 62 symbols and shows no modulo bias (chi-square and head/tail ratio)', () => {
    let text = '';
    for (let i = 0; i < SAMPLE_CHUNKS; i += 1) text += randomBase62(CHUNK);
    const counts = histogram(text);
    expect(counts.every((n) => n > 0)).toBe(true);
    expect(chiSquare(counts)).toBeLessThan(CHI_SQUARE_BOUND);
    expect(headRatio(counts)).toBeLessThan(HEAD_RATIO_BOUND);
    expect(headRatio(counts)).toBeGreaterThan(1 / HEAD_RATIO_BOUND);
  });

  it('the same bounds reject a `byte % 62` generator (the test has teeth)', () => {
    const counts = histogram(moduloBiased(SAMPLE_CHUNKS * CHUNK));
    expect(chiSquare(counts)).toBeGreaterThan(CHI_SQUARE_BOUND);
    expect(headRatio(counts)).toBeGreaterThan(HEAD_RATIO_BOUND);
  });

  it('does not repeat itself', () => {
    const seen = new Set(Array.from({ length: 2000 }, () => randomBase62(KEY_RANDOM_LENGTH)));
    expect(seen.size).toBe(2000);
  });
});

describe('generateKey', () => {
  it('makes sk_live_ + 32 base-62 characters, its last four, a 16-byte hex salt, the salted HMAC and the lookup digest', () => {
    const material = generateKey();
    expect(KEY_PREFIX).toBe('sk_live_');
    expect(KEY_RANDOM_LENGTH).toBe(32);
    expect(material.key).toMatch(KEY);
    expect(material.lastFour).toBe(material.key.slice(-4));
    expect(material.salt).toMatch(/^[0-9a-f]{32}$/);
    expect(material.hash).toBe(createHmac('sha256', material.salt).update(material.key).digest('hex'));
    expect(material.hash).not.toBe(createHash('sha256').update(material.key).digest('hex'));
    expect(material.lookupDigest).toBe(createHash('sha256').update(material.key).digest('hex'));
    expect(hashKey(material.key, material.salt)).toBe(material.hash);
    expect(lookupDigest(material.key)).toBe(material.lookupDigest);
  });

  it('draws a fresh key and a fresh salt every time', () => {
    const all = Array.from({ length: 200 }, () => generateKey());
    expect(new Set(all.map((m) => m.key)).size).toBe(200);
    expect(new Set(all.map((m) => m.salt)).size).toBe(200);
    expect(new Set(all.map((m) => m.hash)).size).toBe(200);
  });

  it('the same key under two salts hashes differently', () => {
    const { key } = generateKey();
    expect(hashKey(key, 'a'.repeat(32))).not.toBe(hashKey(key, 'b'.repeat(32)));
  });
});

describe('isWellFormedKey', () => {
  it('accepts exactly the key shape', () => {
    expect(isWellFormedKey(generateKey().key)).toBe(true);
    for (const bad of [
      '',
      'sk_live_',
      `sk_live_${'a'.repeat(31)}`,
      `sk_live_${'a'.repeat(33)}`,
      `sk_test_${'a'.repeat(32)}`,
      `sk_live_${'a'.repeat(31)}-`,
      ` sk_live_${'a'.repeat(32)}`,
      `sk_live_${'a'.repeat(32)}\n`,
    ]) {
      expect(isWellFormedKey(bad), JSON.stringify(bad)).toBe(false);
    }
  });
});

describe('safeEqual and verifyKey', () => {
  it('is true on equal strings and false on different ones of the same length', () => {
    expect(safeEqual('abc', 'abc')).toBe(true);
    expect(safeEqual('', '')).toBe(true);
    expect(safeEqual('abc', 'abd')).toBe(false);
  });

  it('is false, without throwing, on different lengths (including the same characters but different byte lengths)', () => {
    expect(() => safeEqual('abc', 'abcd')).not.toThrow();
    expect(safeEqual('abc', 'abcd')).toBe(false);
    expect(safeEqual('abcd', 'abc')).toBe(false);
    expect(safeEqual('', 'a')).toBe(false);
    expect(safeEqual('é', 'e')).toBe(false);
  });

  it('verifies a key against its salt and hash, and nothing else', () => {
    const material = generateKey();
    expect(verifyKey(material.key, material.salt, material.hash)).toBe(true);
    expect(verifyKey(generateKey().key, material.salt, material.hash)).toBe(false);
    expect(verifyKey(material.key, 'f'.repeat(32), material.hash)).toBe(false);
    expect(verifyKey(material.key, material.salt, material.hash.slice(0, -1))).toBe(false);
    expect(verifyKey(material.key, material.salt, '')).toBe(false);
  });
});
