import { hashPassword as libraryHashPassword } from 'better-auth/crypto';
import { hashPassword, SCRYPT_SLOTS } from '../../src/auth/password.js';

/**
 * The raw rate of the password hash the server uses — src/auth/password.ts
 * `hashPassword`, the function `emailAndPassword.password.hash` is set to
 * (better-auth's scrypt parameters on node:crypto, at most SCRYPT_SLOTS at
 * once in libuv's pool) — at the given concurrency, for `seconds`, with no
 * HTTP and no database. Counted like autocannon counts answers: only hashes
 * finished inside the window (the ones still in flight when it closes finish
 * but are not counted).
 * Usage: bench-hash.ts [concurrency=50] [seconds=10] [server|library]
 * (`library`: better-auth/crypto's default `hashPassword` instead, to compare.)
 */
const concurrency = Number(process.argv[2] ?? 50);
const seconds = Number(process.argv[3] ?? 10);
const which = process.argv[4] === 'library' ? 'library' : 'server';
const hash = which === 'library' ? libraryHashPassword : hashPassword;

const until = performance.now() + seconds * 1000;
let done = 0;
let afterWindow = 0;
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (performance.now() < until) {
      await hash('correct horse battery staple');
      if (performance.now() <= until) done += 1;
      else afterWindow += 1;
    }
  }),
);
console.log(
  JSON.stringify({
    hashesPerSecond: done / seconds,
    function:
      which === 'library'
        ? 'better-auth/crypto hashPassword (library default)'
        : `src/auth/password.ts hashPassword (node:crypto scrypt, ${SCRYPT_SLOTS} at once)`,
    finishedAfterWindow: afterWindow,
  }),
);
