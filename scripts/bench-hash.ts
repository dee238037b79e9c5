import { hashPassword } from 'better-auth/crypto';

/** The raw rate of the password hash the library uses (same parameters), at the given concurrency, for `seconds`. */
const concurrency = Number(process.argv[2] ?? 50);
const seconds = Number(process.argv[3] ?? 10);
const until = Date.now() + seconds * 1000;
let done = 0;
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (Date.now() < until) {
      await hashPassword('correct horse battery staple');
      done += 1;
    }
  }),
);
console.log(JSON.stringify({ hashesPerSecond: done / seconds }));
