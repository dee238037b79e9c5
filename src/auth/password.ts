import { Buffer } from 'node:buffer';
import * as nodeCrypto from 'node:crypto';
import * as os from 'node:os';
import { hashPassword as libraryHashPassword, verifyPassword as libraryVerifyPassword } from 'better-auth/crypto';

/**
 * Password hashing for better-auth's `emailAndPassword.password` hooks:
 * exactly the library's default scrypt (@better-auth/utils/password, both its
 * node:crypto and its @noble/hashes builds): N=16384, r=16, p=1, 64-byte key,
 * password NFKC-normalised, a 16-byte random salt whose *hex string* is the
 * scrypt salt, stored as `<salt hex>:<key hex>`. Hashes written by either
 * side verify on the other (tests/auth/password.test.ts checks both ways).
 *
 * What differs from the default:
 * - On Node, at most `SCRYPT_SLOTS` derivations are in libuv's thread pool at
 *   once; the rest wait here, in arrival order. Unbounded, a burst of
 *   sign-ins fills the pool's FIFO queue with scrypt jobs (~0.14 s of CPU
 *   each on a 2-core box), and every other job on that pool waits behind the
 *   whole backlog — among them the WebCrypto HMAC with which the library signs
 *   the session cookie, so each sign-in went through the queue twice and the
 *   first answers of a burst came only once every hash queued before them was
 *   done. The bound leaves a pool thread for that other work.
 * - The key is compared in constant time (the default uses `===` on hex).
 *
 * Runtimes: workerd (Cloudflare Workers with nodejs_compat) implements
 * node:crypto `scrypt` natively (BoringSSL, on the isolate's own thread: there
 * is no pool), and the library already uses it there; we take the same path,
 * without the bound (its queue would resolve one request's promise from
 * another's). Where node:crypto has no `scrypt` the library's own functions
 * run instead (same format).
 */
export const SCRYPT_PARAMS = { N: 16384, r: 16, p: 1, dkLen: 64 } as const;
/**
 * The library's value (128·N·r·2 = 64 MiB). scrypt needs about 128·r·(N+p+2)
 * bytes, just over 32 MiB here, so Node's 32 MiB default would refuse it.
 */
const MAXMEM = 128 * SCRYPT_PARAMS.N * SCRYPT_PARAMS.r * 2;

const scrypt = typeof nodeCrypto.scrypt === 'function' ? nodeCrypto.scrypt : null;
const inWorkers = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === 'Cloudflare-Workers';

/** Pool threads the derivations may hold at once: one fewer than libuv's pool (default 4), and no more than the cores. */
function scryptSlots(): number {
  const pool = Number(process.env.UV_THREADPOOL_SIZE) || 4;
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  return Math.max(1, Math.min(pool - 1, cores));
}

export const SCRYPT_SLOTS = scrypt && !inWorkers ? scryptSlots() : Infinity;

let running = 0;
const waiting: (() => void)[] = [];

async function withSlot<T>(task: () => Promise<T>): Promise<T> {
  if (running >= SCRYPT_SLOTS) await new Promise<void>((resolve) => waiting.push(resolve));
  else running += 1;
  try {
    return await task();
  } finally {
    // Hand the slot straight to the next in line (running stays the same), or free it.
    const next = waiting.shift();
    if (next) next();
    else running -= 1;
  }
}

function deriveKey(password: string, salt: string): Promise<Buffer> {
  const { N, r, p, dkLen } = SCRYPT_PARAMS;
  return withSlot(
    () =>
      new Promise<Buffer>((resolve, reject) => {
        scrypt!(password.normalize('NFKC'), salt, dkLen, { N, r, p, maxmem: MAXMEM }, (error, key) =>
          error ? reject(error) : resolve(key),
        );
      }),
  );
}

export async function hashPassword(password: string): Promise<string> {
  if (!scrypt) return libraryHashPassword(password);
  const salt = nodeCrypto.randomBytes(16).toString('hex');
  const key = await deriveKey(password, salt);
  return `${salt}:${key.toString('hex')}`;
}

export async function verifyPassword({ hash, password }: { hash: string; password: string }): Promise<boolean> {
  if (!scrypt) return libraryVerifyPassword({ hash, password });
  const [salt, key] = hash.split(':');
  // As the library: a stored value that is not `salt:key` is an error, not a wrong password.
  if (!salt || !key) throw new Error('Invalid password hash');
  // The library's comparison (lower-case hex strings), in constant time.
  const derived = Buffer.from((await deriveKey(password, salt)).toString('hex'));
  const expected = Buffer.from(key);
  return derived.length === expected.length && nodeCrypto.timingSafeEqual(derived, expected);
}
