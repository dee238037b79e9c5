/**
 * `npm run bench`: throughput and latency of the service's hot paths beside
 * the ceiling (a bare Hono app on the same adapter), in one run, on this
 * machine. The service runs as its real Node entry in a child process, on
 * PostgreSQL when DATABASE_URL is set and the embedded engine otherwise.
 * Options: --duration <s> (default 10), --connections <n> (default 50),
 * --warmup <s> (default 2). Results: a table on stdout and JSON in
 * bench-results/ (git-ignored). Never run from the test suite.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import autocannon from 'autocannon';
import { createApp } from '../../src/app.js';
import { listenForSessionStateChanges } from '../../src/auth/session.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { openDatabase } from '../../src/db/open.js';
import { createMemoryStore } from '../../src/platform/rate-limit-store.js';
import { parseConfig } from '../../src/shared/config.js';
import { createMemoryLogger } from '../../src/shared/logger.js';
import { liveClient, type Mail, PASSWORD } from '../support/live-client.js';
import { eachLine, freePort } from '../support/process.js';
import { startReceiver } from '../support/webhooks.js';
import { measureStaleness } from './bench-staleness.js';
import { runWorkerBench } from './bench-worker.js';
import { seedBenchTenant } from './seed.js';
import { type StalenessFigure, targetRows, type WorkerFigure } from './targets.js';

const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2)
  args.set(process.argv[i]!.replace(/^--/, ''), process.argv[i + 1] ?? '');
const DURATION = Number(args.get('duration') ?? 10);
const CONNECTIONS = Number(args.get('connections') ?? 50);
const WARMUP = Number(args.get('warmup') ?? 2);
/** --only <scenario name> (health, session, session-db, roles, roles-write, sign-in, api-key, rl-memory, rl-redis, staleness): run just that one beside the ceiling; --only worker: the Worker's scenarios alone; --only startup: the start-up times alone. */
const ONLY = args.get('only');
/** --profile <dir>: the service processes write V8 CPU profiles there (node --cpu-prof), to read what bounds a scenario. */
const PROFILE = args.get('profile');
/** --worker-connections <n> (default 50, as Node's): autocannon's connections for the Worker's scenarios (tests/perf/bench-worker.ts). */
const WORKER_CONNECTIONS = Number(args.get('worker-connections') ?? 50);
const SECRET = `bench-${crypto.randomUUID()}-${crypto.randomUUID()}`;
const ORIGIN = 'http://localhost:3000';

interface Child {
  process: ChildProcess;
  port: number;
  lines: Record<string, unknown>[];
  startedMs: number;
  stop(): Promise<void>;
}

let built = false;

async function start(command: string[], env: Record<string, string>, port: number): Promise<Child> {
  const began = performance.now();
  const profile = PROFILE && command[0] === 'src/entries/server.ts' ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE}`] : [];
  // The service runs as `npm start` runs it: compiled (built once per bench run, as start.mjs would).
  if (command[0] === 'src/entries/server.ts') {
    if (!built) {
      execFileSync(process.execPath, ['scripts/build.mjs'], { encoding: 'utf8' });
      built = true;
    }
    command = ['dist/node/server.js', ...command.slice(1)];
  }
  const runner = command[0]!.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...profile, ...runner, ...command], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  eachLine(child, (line) => {
    // Access lines are dropped unparsed: the bench shares the machine's cores with the server.
    if (line.includes('"event":"request"')) return;
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // not a log line
    }
  });
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited: ${JSON.stringify(lines.slice(-5))}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}${command[0]!.includes('ceiling') ? '/json' : '/api/health'}`);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('server did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  const startedMs = performance.now() - began;
  return {
    process: child,
    port,
    lines,
    startedMs,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * 1,000 events to a slow endpoint (each answer after 250 ms): how long until
 * all are delivered, how many the receiver saw at once (the deliverer's
 * bound), and the service's resident memory before and at its peak
 * (/proc/<pid>/status), so a backlog is seen to cost bounded memory.
 */
async function webhookBurst(server: Child, cookie: string): Promise<Record<string, number>> {
  const EVENTS = 1_000;
  const DELAY_MS = 250;
  const receiver = await startReceiver(async () => {
    await new Promise((r) => setTimeout(r, DELAY_MS));
    return { status: 200 };
  });
  const base = `http://127.0.0.1:${server.port}`;
  const headers = { cookie, origin: ORIGIN, 'content-type': 'application/json' };
  const created = await fetch(`${base}/api/webhooks`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ url: receiver.url, events: ['role.created'] }),
  });
  const { id } = (await created.json()) as { id: string };
  const rss = () => {
    const status = readFileSync(`/proc/${server.process.pid}/status`, 'utf8');
    return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  };
  const rssBefore = rss();
  let rssPeak = rssBefore;
  const sampler = setInterval(() => {
    rssPeak = Math.max(rssPeak, rss());
  }, 100);
  const began = performance.now();
  let next = 0;
  const roles: string[] = [];
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      while (next < EVENTS) {
        next += 1;
        const res = await fetch(`${base}/api/roles`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ name: `burst ${process.pid} ${next}`, permissions: ['roles:read'] }),
        });
        if (res.status === 201) roles.push(((await res.json()) as { id: string }).id);
      }
    }),
  );
  const writtenS = (performance.now() - began) / 1000;
  const deadline = Date.now() + 600_000;
  while (receiver.received.length < EVENTS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  const deliveredS = (performance.now() - began) / 1000;
  clearInterval(sampler);
  await receiver.close();
  await fetch(`${base}/api/webhooks/${id}`, { method: 'DELETE', headers });
  for (const role of roles) await fetch(`${base}/api/roles/${role}`, { method: 'DELETE', headers });
  const round = (n: number) => Math.round(n * 10) / 10;
  return {
    events: EVENTS,
    receiverDelayMs: DELAY_MS,
    writtenInS: round(writtenS),
    deliveredInS: round(deliveredS),
    delivered: receiver.received.length,
    distinctWebhookIds: new Set(receiver.received.map((r) => String(r.headers['webhook-id']))).size,
    receiverMaxInFlight: receiver.inFlight.max,
    rssBeforeMiB: round(rssBefore),
    rssPeakMiB: round(rssPeak),
  };
}

/** The mails among the service's log lines (its development mailer). */
function mailsIn(lines: Record<string, unknown>[]): Mail[] {
  return lines
    .filter((line) => line.event === 'email')
    .map((line) => ({ to: String(line.to), subject: String(line.subject), text: String(line.text) }));
}

interface Scenario {
  name: string;
  port: number;
  requests: autocannon.Request[];
  sql?: number | null;
}

interface Result {
  scenario: string;
  /** The --only name of the scenario (the key of its target in tests/perf/targets.ts). */
  name: string;
  requestsPerSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  /** Errors of which autocannon's 10 s request timeouts. */
  errors: number;
  timeouts: number;
  ratio: number;
  sqlPerRequest: number | null;
  marked: boolean;
}

async function measure(s: Scenario, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: `http://127.0.0.1:${s.port}`,
    connections: CONNECTIONS,
    duration: seconds,
    requests: s.requests,
  });
}

/** The scenario name each measurement was run as, for its row's target. */
const ranAs = new Map<autocannon.Result, string>();

async function run(s: Scenario): Promise<autocannon.Result | null> {
  if (ONLY && s.name !== ONLY && s.name !== 'ceiling') return null;
  // Drain: autocannon abandons the requests in flight when the warm-up ends,
  // and the server still works them off. Wait as long as the slowest of them
  // could take (the warm-up's p99), at least half a second.
  const warm = WARMUP > 0 ? await measure(s, WARMUP) : null;
  await new Promise((r) => setTimeout(r, Math.max(500, Math.min(warm?.latency.p99 ?? 0, 15_000))));
  const result = await measure(s, DURATION);
  ranAs.set(result, s.name);
  return result;
}

/** Resident memory of a process in MiB (/proc/<pid>/status). */
function rssMiB(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round((Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024) * 10) / 10;
}

/** SQL statements per request, counted through a Kysely log hook on an in-process app over a few sequential requests. */
async function countSql(): Promise<Record<string, number>> {
  let statements = 0;
  const database = await openDatabase({
    url: 'pglite://memory',
    log: (event) => {
      if (event.level === 'query') statements += 1;
    },
  });
  await migrateToLatest(database);
  const { config } = parseConfig({
    NODE_ENV: 'test',
    AUTH_SECRET: SECRET,
    RATE_LIMIT_ENABLED: 'false',
    API_KEY_AUTH: 'enabled',
  });
  const logger = createMemoryLogger('info');
  // As the Node entry builds it: session states cached, cleared by the database's notifications.
  const app = createApp(
    { config, database, rateLimitStore: createMemoryStore(), logger },
    { sessionStateCache: await listenForSessionStateChanges(database) },
  );
  const request = async (path: string, init?: RequestInit) => app.request(path, init);
  const seeded = await seedBenchTenant(
    liveClient('http://localhost', (url, init) => app.request(url, init)),
    () => mailsIn(logger.lines),
  );
  const sample = async (fn: () => Promise<unknown>, times = 5) => {
    await fn();
    statements = 0;
    for (let i = 0; i < times; i++) await fn();
    return statements / times;
  };
  const result: Record<string, number> = {
    health: await sample(() => request('/api/health')),
    sessionCached: await sample(() => request('/api/session', { headers: { cookie: seeded.cookie } })),
    sessionDatabase: await sample(() => request('/api/session', { headers: { cookie: seeded.tokenOnlyCookie } })),
    listRoles: await sample(() => request('/api/roles', { headers: { cookie: seeded.cookie } })),
    createDeleteRole: await sample(async () => {
      const created = await request('/api/roles', {
        method: 'POST',
        headers: { cookie: seeded.cookie, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `r ${crypto.randomUUID()}`, permissions: ['roles:read'] }),
      });
      const { id } = (await created.json()) as { id: string };
      await request(`/api/roles/${id}`, { method: 'DELETE', headers: { cookie: seeded.cookie } });
    }),
    signIn: await sample(() =>
      request('/api/auth/sign-in/email', {
        method: 'POST',
        headers: { origin: ORIGIN, 'content-type': 'application/json' },
        body: JSON.stringify({ email: seeded.email, password: PASSWORD }),
      }),
    ),
    apiKeyRead: await sample(() => request('/api/roles', { headers: { authorization: `Bearer ${seeded.apiKey}` } })),
  };
  await database.close();
  return result;
}

async function workerBundleGzipKiB(): Promise<number | null> {
  const out = await mkdtemp(join(tmpdir(), 'gatehouse-worker-'));
  try {
    await new Promise<void>((resolve, reject) => {
      const child = spawn('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', out], {
        stdio: 'ignore',
        env: { ...process.env, WRANGLER_SEND_METRICS: 'false' },
      });
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`wrangler exited ${code}`))));
    });
    let total = 0;
    for (const file of await readdir(out)) {
      if (!file.endsWith('.js')) continue;
      total += gzipSync(await readFile(join(out, file))).length;
    }
    return Math.round((total / 1024) * 10) / 10;
  } catch {
    return null;
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

/** The Worker's scenarios in workerd beside a bare Hono worker (tests/perf/bench-worker.ts); needs .ci/services.sh's servers. */
async function workerScenarios(notes: Record<string, unknown>): Promise<void> {
  console.error('Worker scenarios (wrangler dev, PostgreSQL through PgBouncer)…');
  const worker = await runWorkerBench({ duration: DURATION, connections: WORKER_CONNECTIONS, warmup: WARMUP });
  if ('skipped' in worker) {
    notes.worker = worker.skipped;
    console.error(worker.skipped);
    return;
  }
  console.table(worker.rows);
  notes.worker = worker;
  workerFigures = worker.rows;
}

/** The Worker's rows when its scenarios ran, for the targets table. */
let workerFigures: WorkerFigure[] | null = null;
/** Two instances' staleness (tests/perf/bench-staleness.ts), on PostgreSQL. */
let stalenessFigure: StalenessFigure | null = null;
/** --flips <n> (default 1000): role flips of the staleness measurement. */
const FLIPS = Number(args.get('flips') ?? 1000);
/** The compiled server's resident memory idle on an existing embedded database (startupTimes). */
let idleRss: number | null = null;

/**
 * Start-up of the compiled server to the first 200 of /api/health, on both
 * engines where both are at hand: the embedded one on a new data directory
 * and on the same directory again, PostgreSQL when DATABASE_URL names it
 * (migrated by then). Each start is a fresh process.
 */
async function startupTimes(engine: string, baseEnv: Record<string, string>, dataDir: string) {
  const startup: Record<string, number> = {};
  const pgliteDir = join(dataDir, 'startup');
  const labels = [
    'pglite, new data directory (initdb + migrations)',
    'pglite, existing data directory',
    'pglite, existing data directory (again)',
  ];
  for (const label of labels) {
    const startupPort = await freePort();
    const started = await start(
      ['src/entries/server.ts'],
      { ...baseEnv, DATABASE_URL: `pglite://${pgliteDir}`, PORT: String(startupPort) },
      startupPort,
    );
    startup[label] = Math.round(started.startedMs);
    if (label === 'pglite, existing data directory') {
      // Idle as `npm start` leaves it (the same compiled file, in one process): 5 s after its first 200.
      await new Promise((r) => setTimeout(r, 5_000));
      idleRss = rssMiB(started.process.pid);
    }
    await started.stop();
  }
  if (engine === 'postgres') {
    for (const label of ['postgres, migrated database', 'postgres, migrated database (again)']) {
      const startupPort = await freePort();
      const started = await start(['src/entries/server.ts'], { ...baseEnv, PORT: String(startupPort) }, startupPort);
      startup[label] = Math.round(started.startedMs);
      await started.stop();
    }
  }
  console.table(startup);
  return startup;
}

async function main() {
  if (ONLY === 'worker') {
    const notes: Record<string, unknown> = { durationSeconds: DURATION, warmupSeconds: WARMUP, node: process.version };
    await workerScenarios(notes);
    return finish('worker', notes, []);
  }
  const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-bench-'));
  process.once('exit', () => rmSync(dataDir, { recursive: true, force: true }));
  const databaseUrl = process.env.DATABASE_URL ?? `pglite://${join(dataDir, 'db')}`;
  const engine = databaseUrl.startsWith('pglite://') ? 'pglite' : 'postgres';
  const baseEnv = {
    NODE_ENV: 'development',
    AUTH_SECRET: SECRET,
    DATABASE_URL: databaseUrl,
    ...(process.env.DATABASE_MIGRATION_URL ? { DATABASE_MIGRATION_URL: process.env.DATABASE_MIGRATION_URL } : {}),
    RATE_LIMIT_ENABLED: 'false',
    API_KEY_AUTH: 'enabled',
    DOCS_ENABLED: 'false',
  };
  const results: Result[] = [];
  const notes: Record<string, unknown> = {
    engine,
    connections: CONNECTIONS,
    durationSeconds: DURATION,
    warmupSeconds: WARMUP,
    node: process.version,
  };

  if (ONLY === 'startup') {
    // The PostgreSQL database must be migrated first: the first start does it.
    if (engine === 'postgres') {
      const port = await freePort();
      await (await start(['src/entries/server.ts'], { ...baseEnv, PORT: String(port) }, port)).stop();
    }
    notes.startupMs = await startupTimes(engine, baseEnv, dataDir);
    return finish(engine, notes, results);
  }

  console.error('counting SQL statements per request…');
  const sql = await countSql();

  const ceilingPort = await freePort();
  const ceiling = await start(['tests/perf/bench-ceiling.ts', String(ceilingPort)], {}, ceilingPort);
  const ceilingResult = await run({ name: 'ceiling', port: ceilingPort, requests: [{ method: 'GET', path: '/json' }] });
  await ceiling.stop();
  const ceilingRps = ceilingResult!.requests.average;
  const record = (name: string, r: autocannon.Result | null, sqlPerRequest: number | null, base = ceilingRps) => {
    if (!r) return;
    const result: Result = {
      scenario: name,
      name: ranAs.get(r) ?? name,
      requestsPerSecond: Math.round(r.requests.average),
      p50: r.latency.p50,
      p99: r.latency.p99,
      non2xx: r.non2xx,
      // autocannon's `errors` already counts its timeouts.
      errors: r.errors,
      timeouts: r.timeouts,
      ratio: Math.round((r.requests.average / base) * 1000) / 1000,
      sqlPerRequest,
      marked: r.non2xx > 0 || r.errors > 0,
    };
    results.push(result);
    console.error(
      `${name}: ${result.requestsPerSecond} req/s, p99 ${result.p99} ms${result.marked ? ' (ERRORS)' : ''}`,
    );
  };
  record('1 ceiling: bare Hono JSON route', ceilingResult, 0);

  const port = await freePort();
  const server = await start(['src/entries/server.ts'], { ...baseEnv, PORT: String(port) }, port);
  const seeded = await seedBenchTenant(liveClient(`http://127.0.0.1:${port}`), () => mailsIn(server.lines));
  const get = (path: string, headers: Record<string, string> = {}): autocannon.Request[] => [
    { method: 'GET', path, headers },
  ];

  record(
    '2 GET /api/health (whole chain)',
    await run({ name: 'health', port, requests: get('/api/health') }),
    sql.health ?? null,
  );
  record(
    '3 GET /api/session (cookie cache)',
    await run({ name: 'session', port, requests: get('/api/session', { cookie: seeded.cookie }) }),
    sql.sessionCached ?? null,
  );
  record(
    '4 GET /api/session (token only: database)',
    await run({ name: 'session-db', port, requests: get('/api/session', { cookie: seeded.tokenOnlyCookie }) }),
    sql.sessionDatabase ?? null,
  );
  record(
    '5 GET /api/roles (permission-checked read)',
    await run({ name: 'roles', port, requests: get('/api/roles', { cookie: seeded.cookie }) }),
    sql.listRoles ?? null,
  );
  let counter = 0;
  /** Create a role, then delete it: one write pair, each with its audit entry. */
  const rolePair = (label: string): autocannon.Request[] => [
    {
      method: 'POST',
      path: '/api/roles',
      headers: { cookie: seeded.cookie, 'content-type': 'application/json' },
      setupRequest: (req) => {
        counter += 1;
        return {
          ...req,
          body: JSON.stringify({ name: `bench ${label} ${process.pid} ${counter}`, permissions: ['roles:read'] }),
        };
      },
      onResponse: (status, body, context) => {
        if (status === 201) (context as Record<string, unknown>).roleId = (JSON.parse(body) as { id: string }).id;
      },
    },
    {
      method: 'DELETE',
      headers: { cookie: seeded.cookie },
      setupRequest: (req, context) => ({
        ...req,
        path: `/api/roles/${String((context as Record<string, unknown>).roleId)}`,
      }),
    },
  ];
  record(
    '6 POST+DELETE /api/roles (writes with audit; per pair)',
    await run({ name: 'roles-write', port, requests: rolePair('role') }),
    sql.createDeleteRole ?? null,
  );
  // 6b: the same pair with a webhook endpoint subscribed to both events: the
  // outbox's INSERT in the write's transaction, and the in-process deliverer
  // sending to a loopback receiver meanwhile (it shares the cores).
  const hooked = await startReceiver();
  const hook = await fetch(`http://127.0.0.1:${port}/api/webhooks`, {
    method: 'POST',
    headers: { cookie: seeded.cookie, origin: ORIGIN, 'content-type': 'application/json' },
    body: JSON.stringify({ url: hooked.url, events: ['role.created', 'role.deleted'] }),
  });
  if (hook.status !== 201) throw new Error(`webhook not created: ${hook.status} ${await hook.text()}`);
  const hookId = ((await hook.json()) as { id: string }).id;
  record(
    '6b POST+DELETE /api/roles, a webhook subscribed (per pair)',
    await run({ name: 'roles-write-webhook', port, requests: rolePair('hooked') }),
    sql.createDeleteRole === undefined ? null : sql.createDeleteRole + 2,
  );
  await fetch(`http://127.0.0.1:${port}/api/webhooks/${hookId}`, {
    method: 'DELETE',
    headers: { cookie: seeded.cookie, origin: ORIGIN },
  });
  notes.webhookWritePair = { delivered: hooked.received.length };
  await hooked.close();
  if (!ONLY || ONLY === 'webhook-burst') notes.webhookBurst = await webhookBurst(server, seeded.cookie);

  record(
    '9 GET /api/roles with an API key',
    await run({ name: 'api-key', port, requests: get('/api/roles', { authorization: `Bearer ${seeded.apiKey}` }) }),
    sql.apiKeyRead ?? null,
  );
  // Sign-in last on this server: its abandoned requests leave seconds of hashing behind.
  const signIn = await run({
    name: 'sign-in',
    port,
    requests: [
      {
        method: 'POST',
        path: '/api/auth/sign-in/email',
        headers: { origin: ORIGIN, 'content-type': 'application/json' },
        body: JSON.stringify({ email: seeded.email, password: PASSWORD }),
      },
    ],
  });
  if (signIn) await new Promise((r) => setTimeout(r, Math.min(signIn.latency.p99, 15_000))); // drain before the raw rate
  const hashRate = !signIn
    ? 0
    : await new Promise<number>((resolve, reject) => {
        const child = spawn(
          process.execPath,
          ['--import', 'tsx', 'tests/perf/bench-hash.ts', String(CONNECTIONS), String(DURATION)],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        let out = '';
        child.stdout!.on('data', (chunk) => (out += chunk));
        child.on('exit', (code) =>
          code === 0
            ? resolve((JSON.parse(out.trim()) as { hashesPerSecond: number }).hashesPerSecond)
            : reject(new Error('hash bench failed')),
        );
      });
  notes.rawHashesPerSecond = Math.round(hashRate * 10) / 10;
  record('7 POST /api/auth/sign-in/email (ratio: to raw hash rate)', signIn, sql.signIn ?? null, hashRate);
  await server.stop();

  // 10: a role change through one instance, read through another (two processes on one PostgreSQL database).
  if (engine !== 'postgres') notes.staleness = 'skipped: two instances need PostgreSQL (DATABASE_URL)';
  else if (!ONLY || ONLY === 'staleness') {
    console.error(`staleness across two instances (${FLIPS} role flips)…`);
    stalenessFigure = await measureStaleness(baseEnv, FLIPS);
    console.table([stalenessFigure]);
    notes.staleness = stalenessFigure;
  }

  // 8: the rate-limit store's added latency on one route.
  const limitedEnv = {
    ...baseEnv,
    RATE_LIMIT_ENABLED: 'true',
    RATE_LIMIT_GLOBAL_LIMIT: '1000000',
    RATE_LIMIT_GLOBAL_TTL: '3600',
  };
  const memPort = await freePort();
  const memory = await start(['src/entries/server.ts'], { ...limitedEnv, PORT: String(memPort) }, memPort);
  record(
    '8a GET /api/health, rate limit: in-memory store',
    await run({ name: 'rl-memory', port: memPort, requests: get('/api/health') }),
    sql.health ?? null,
  );
  await memory.stop();
  if (process.env.TEST_REDIS_URL) {
    const { startUpstashServer } = await import('../support/upstash-server.js');
    const token = crypto.randomUUID();
    const upstash = await startUpstashServer({ redisUrl: process.env.TEST_REDIS_URL, token });
    const upPort = await freePort();
    const viaRedis = await start(
      ['src/entries/server.ts'],
      { ...limitedEnv, PORT: String(upPort), KV_REST_API_URL: upstash.url, KV_REST_API_TOKEN: token },
      upPort,
    );
    record(
      '8b GET /api/health, rate limit: Upstash protocol over Redis',
      await run({ name: 'rl-redis', port: upPort, requests: get('/api/health') }),
      sql.health ?? null,
    );
    await viaRedis.stop();
    await upstash.close();
  } else {
    notes.redisScenario = 'skipped: set TEST_REDIS_URL (source .ci/services.sh && services_start)';
  }

  if (ONLY) return finish(engine, notes, results);
  notes.startupMs = {
    [`${engine} (bench server)`]: Math.round(server.startedMs),
    ...(await startupTimes(engine, baseEnv, dataDir)),
  };

  notes.workerBundleGzipKiB = await workerBundleGzipKiB();
  await workerScenarios(notes);

  await finish(engine, notes, results);
}

async function finish(engine: string, notes: Record<string, unknown>, results: Result[]) {
  const rows = results.map((r) => ({
    scenario: r.scenario,
    'req/s': r.requestsPerSecond,
    'p50 ms': r.p50,
    'p99 ms': r.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    ratio: r.ratio,
    'SQL/req': r.sqlPerRequest,
    flag: r.marked ? 'ERRORS' : '',
  }));
  console.table(rows);
  if (idleRss !== null) notes.idleRssMiB = idleRss;
  const targets = targetRows(results, workerFigures, engine === 'pglite', idleRss, stalenessFigure);
  console.log(JSON.stringify(notes, null, 2));
  await mkdir('bench-results', { recursive: true });
  const file = join('bench-results', `bench-${engine}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await writeFile(file, JSON.stringify({ notes, results, targets }, null, 2));
  console.log(`written: ${file} (${(await stat(file)).size} bytes)`);
  console.log('targets (ratios to a base measured in this run; docs/performance.md, "The bench"):');
  console.table(targets);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
