// `postinstall`: patches postgres.js 3.4.9 (the runtime driver) where a
// connection that closes under a reserved connection crashes the process or
// poisons the pool. Found by tests/faults/postgres.test.ts (PostgreSQL stopped
// during traffic: "TypeError: Cannot read properties of null (reading
// 'write')" from an Immediate, uncatchable, the service exits). Upstream:
// porsager/postgres#1066, #1154, #1208 (open), fixes proposed in #1168/#1209.
//
//   1. nextWrite(): the socket may be gone when a deferred write fires; settle
//      the queries waiting on it (CONNECTION_CLOSED) instead of throwing.
//   2. closed()/terminate(): a cleared write timer is also forgotten, or the
//      connection never schedules a write again (its reconnects hang).
//   3. reserve(): kysely-postgres-js reserves a connection per query and per
//      transaction. When that connection closes, the pool has already taken it
//      back (onclose); the holder's later queries (a ROLLBACK) are refused and
//      its release() must not hand the dead connection to the open queue.
//   4. onclose(): queries the holder queued on its reserved connection while
//      the connection was busy are rejected when it dies; they were left
//      pending forever (a request that never answers while PostgreSQL stops).
//   5. A connection opened for a reservation is handed to that reservation.
//      A reservation waiting in the pool's queue while PostgreSQL was down
//      became the first query of a reconnecting connection; when that
//      connect succeeded, postgres.js dropped it (it serves the queue once
//      the types are fetched, and the reservation had left the queue), so
//      its request waited out the acquire timeout with the database back
//      (tests/faults/postgres.test.ts: no answer in the 2 s after recovery,
//      about one run in three). Now the connection opened for a reservation
//      hands itself to it, and reserve() queues a reservation only when no
//      connection opens for it (a reservation both queued and first query
//      could be served twice: once settled, its connection was leaked).
//
// Idempotent; checks what it replaces and fails loudly when the driver changes
// (drop this script once a fixed postgres.js is used).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const MARK = 'gatehouse-patch';
const require = createRequire(import.meta.url);
let root;
try {
  // The package's exports hide package.json: walk up from its entry.
  root = dirname(require.resolve('postgres'));
  while (
    !existsSync(join(root, 'package.json')) ||
    JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).name !== 'postgres'
  )
    root = dirname(root);
} catch {
  console.log('[patch-postgres] postgres is not installed; nothing to patch');
  process.exit(0);
}
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

const connectionEdits = [
  [
    '      if (needsTypes) {\n        initial.reserve && (initial = null)\n        return fetchArrayTypes()\n      }\n\n      initial && !initial.reserve && execute(initial)\n      options.shared.retries = retries = 0\n      initial = null\n      return\n',
    `      if (needsTypes)\n        return fetchArrayTypes() // ${MARK}: a reservation waits for the types too\n\n      const opened = initial // ${MARK}: a reservation gets the connection opened for it\n      options.shared.retries = retries = 0\n      initial = null\n      opened.reserve ? opened.reserve(connection) : execute(opened)\n      return\n`,
  ],
  [
    '  function nextWrite(fn) {\n    const x = socket.write(chunk, fn)\n',
    `  function nextWrite(fn) {\n    if (!socket) { // ${MARK}: closed after the write was scheduled\n      nextWriteTimer !== null && clearImmediate(nextWriteTimer)\n      chunk = nextWriteTimer = null\n      error(Errors.connection('CONNECTION_CLOSED', options))\n      return false\n    }\n    const x = socket.write(chunk, fn)\n`,
  ],
  [
    /^ {4}clearImmediate\(nextWriteTimer\)\n/gm,
    `    clearImmediate(nextWriteTimer)\n    chunk = nextWriteTimer = null // ${MARK}\n`,
    2,
  ],
];

const indexEdits = [
  [
    '    move(c, reserved)\n    c.reserved = () => queue.length\n      ? c.execute(queue.shift())\n      : move(c, reserved)\n    c.reserved.release = true\n\n    const sql = Sql(handler)\n    sql.release = () => {\n      c.reserved = null\n      onopen(c)\n    }\n',
    `    move(c, reserved)\n    c.reserved = () => queue.length\n      ? c.execute(queue.shift())\n      : move(c, reserved)\n    c.reserved.release = true\n    const mine = c.reserved // ${MARK}: onclose() clears it when the connection dies\n    mine.closed = (e) => { while (queue.length) queue.shift().reject(e) } // ${MARK}\n\n    const sql = Sql(handler)\n    sql.release = () => {\n      if (c.reserved !== mine) return // ${MARK}: closed meanwhile, the pool has it back\n      c.reserved = null\n      onopen(c)\n    }\n`,
  ],
  [
    '  function onclose(c, e) {\n    move(c, closed)\n    c.reserved = null\n',
    `  function onclose(c, e) {\n    move(c, closed)\n    const holder = c.reserved // ${MARK}: queries the holder queued are settled too\n    c.reserved = null\n    holder && holder.closed && holder.closed(e)\n`,
  ],
  [
    '    function handler(q) {\n      c.queue === full\n',
    `    function handler(q) {\n      if (c.reserved !== mine) return q.reject(Errors.connection('CONNECTION_CLOSED', options)) // ${MARK}\n      c.queue === full\n`,
  ],
  [
    '        const query = { reserve: resolve, reject }\n        queries.push(query)\n        closed.length && connect(closed.shift(), query)\n',
    `        const query = { reserve: resolve, reject }\n        // ${MARK}: queued only when no connection opens for it (the one that does hands itself over)\n        closed.length ? connect(closed.shift(), query) : queries.push(query)\n`,
  ],
];

function patch(file, edits) {
  const path = join(root, file);
  if (!existsSync(path)) return;
  let text = readFileSync(path, 'utf8');
  let changed = false;
  for (const [from, to, count = 1] of edits) {
    // Each edit once: a copy patched by an earlier version of this script gets only the new ones.
    if (text.includes(to)) continue;
    changed = true;
    const found = typeof from === 'string' ? text.split(from).length - 1 : (text.match(from) ?? []).length;
    if (found !== count) {
      console.error(
        `[patch-postgres] postgres ${version}: ${file} does not have the code this patch expects (${found}/${count}); review scripts/patch-postgres.mjs`,
      );
      process.exit(1);
    }
    text = typeof from === 'string' ? text.replace(from, to) : text.replace(from, to);
  }
  if (!changed) return;
  writeFileSync(path, text);
  console.log(`[patch-postgres] patched ${file}`);
}

for (const dir of ['src', 'cjs/src', 'cf/src']) {
  patch(`${dir}/connection.js`, connectionEdits);
  patch(`${dir}/index.js`, indexEdits);
}
