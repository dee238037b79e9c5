import { expect } from 'vitest';

/** docs/api.md "Rate limiting": the headers of a limited tier. */
// Oracle: copied from the contract on purpose; the service must agree with it.
export const RATE_LIMIT_HEADERS = [
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Reset',
  'Retry-After',
] as const;

let addresses = 0;

/**
 * A fresh client address per call, so tests sharing an app never share a
 * budget. From 198.18.0.0/15, which no test writes by hand.
 */
export function nextIp(): string {
  addresses += 1;
  return `198.18.${Math.floor(addresses / 250)}.${(addresses % 250) + 1}`;
}

/** A 429 in the contract's shape with its four headers (docs/api.md "Rate limiting"); returns when the block or window ends. */
export async function expectRateLimited(res: Response, limit: number) {
  expect(res.status).toBe(429);
  expect(await res.json()).toEqual({ code: 'RATE_LIMITED', message: expect.any(String) });
  expect(res.headers.get('X-RateLimit-Limit')).toBe(String(limit));
  expect(res.headers.get('X-RateLimit-Remaining')).toBe('0');
  expect(res.headers.get('X-RateLimit-Reset')).toMatch(/^\d+$/);
  expect(res.headers.get('Retry-After')).toMatch(/^\d+$/);
  return { reset: Number(res.headers.get('X-RateLimit-Reset')), retryAfter: Number(res.headers.get('Retry-After')) };
}
