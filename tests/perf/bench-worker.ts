/**
 * The Worker's scenarios of `npm run bench`: src/entries/worker.ts under
 * `wrangler dev --local` (workerd), PostgreSQL through PgBouncer (the local
 * stand-in for Hyperdrive) via the Hyperdrive binding, beside a bare Hono
 * worker (tests/perf/bench-worker-bare.ts) run by the same wrangler and workerd
 * in the same run. Needs the servers of .ci/services.sh (TEST_PG_URL,
 * TEST_POOLER_URL, TEST_POOLER_APP_URL). Also runs on its own:
 * `npx tsx tests/perf/bench-worker.ts [--duration s] [--connections n] [--warmup s]`.
 *
 * PostgreSQL sessions per request: server backends of the runtime role
 * started during each measured window (pg_stat_activity.backend_start; the
 * pooler keeps the ones it opened), and pg_stat_database.sessions over the
 * whole Worker run. Cold start: fresh wrangler dev to the first 200.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { openPostgres } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { releaseDatabase } from '../e2e/support/pooler.js';
import { REPO_ROOT, startMailCapture } from '../e2e/support/servers.js';
import { randomSecret, startWranglerDev, type WranglerDev } from '../e2e/support/wrangler.js';
import { liveClient } from '../support/live-client.js';
import { freePort } from '../support/process.js';
import { withDatabaseName } from '../support/servers.js';
import { type BenchTenant, seedBenchTenant } from './seed.js';

const ORIGIN = 'http://localhost:3000';

export interface WorkerRow {
  scenario: string;
  'req/s': number;
  'p50 ms': number;
  'p99 ms': number;
  non2xx: number;
  errors: number;
  ratio: number;
  target: string;
  'new PG sessions/req': number | null;
  'cross-tenant': number | null;
}

export interface WorkerBenchOptions {
  duration: number;
  connections: number;
  warmup: number;
}

type Tenant = BenchTenant;

/** A tenant with a role only it has, seeded through the worker at `base`; the mails from the capture standing in for Resend. */
export function seedTenant(base: string, mail: Awaited<ReturnType<typeof startMailCapture>>): Promise<Tenant> {
  return seedBenchTenant(
    liveClient(base),
    () => mail.emails.map((m) => ({ to: m.to, subject: m.subject, text: m.text ?? '' })),
    { markerRole: true },
  );
}

function runNode(args: string[], env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(args[0]!, args.slice(1), {
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, ...env },
    });
    let out = '';
    child.stdout!.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${args.join(' ')} exited ${code}`))));
  });
}

/**
 * The bundle's top-level evaluation and the first request's construction of
 * the app (config, router, better-auth, OpenAPI registry), each in a fresh
 * Node process (V8, like workerd; inside workerd the clock stands still
 * during synchronous code, so it cannot time itself). Median of three.
 */
async function evaluationTimes(): Promise<Record<string, number> | string> {
  const out = await mkdtemp(join(tmpdir(), 'gatehouse-worker-eval-'));
  try {
    await runNode(['npx', 'wrangler', 'deploy', '--dry-run', '--outdir', out], { WRANGLER_SEND_METRICS: 'false' });
    const runs: { evaluatedMs: number; firstRequestMs: number; secondRequestMs: number }[] = [];
    for (let i = 0; i < 3; i++) {
      const line = (
        await runNode([process.execPath, join(REPO_ROOT, 'tests/perf/bench-worker-eval.mjs'), join(out, 'worker.js')])
      )
        .trim()
        .split('\n')
        .pop()!;
      runs.push(JSON.parse(line));
    }
    const median = (pick: (r: (typeof runs)[number]) => number) =>
      Math.round(runs.map(pick).sort((x, y) => x - y)[1]! * 10) / 10;
    return {
      'top-level evaluation of the bundle (ms)': median((r) => r.evaluatedMs),
      'first request: config + app construction, signed-out /api/session (ms)': median((r) => r.firstRequestMs),
      'second request (ms)': median((r) => r.secondRequestMs),
    };
  } catch (error) {
    return `not measured: ${(error as Error).message}`;
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

export async function runWorkerBench(
  options: WorkerBenchOptions,
): Promise<{ rows: WorkerRow[]; notes: Record<string, unknown> } | { skipped: string }> {
  const { TEST_PG_URL, TEST_POOLER_URL, TEST_POOLER_APP_URL, TEST_PG_APP_URL } = process.env;
  if (!TEST_PG_URL || !TEST_PG_APP_URL || !TEST_POOLER_URL || !TEST_POOLER_APP_URL) {
    return { skipped: 'Worker scenarios need PostgreSQL and PgBouncer: source .ci/services.sh && services_start' };
  }
  const { duration, connections, warmup } = options;
  const databaseName = `gatehouse_bench_${crypto.randomUUID().replaceAll('-', '')}`;
  const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${databaseName}"`);
  const database = await openPostgres({
    url: withDatabaseName(TEST_PG_APP_URL, databaseName),
    migrationUrl: withDatabaseName(TEST_POOLER_URL, databaseName),
    poolMax: 1,
  });
  await migrateToLatest(database);
  await database.close();

  const mail = await startMailCapture();
  const rows: WorkerRow[] = [];
  const notes: Record<string, unknown> = {
    connections,
    durationSeconds: duration,
    warmupSeconds: warmup,
    database: 'PostgreSQL through PgBouncer (session pooling) via the Hyperdrive binding',
  };
  const hyperdriveEnv = {
    CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE: withDatabaseName(TEST_POOLER_APP_URL, databaseName),
  };
  let worker: WranglerDev | undefined;

  const measure = (port: number, requests: autocannon.Request[], seconds: number) =>
    autocannon({ url: `http://127.0.0.1:${port}`, connections, duration: seconds, requests });
  const sessionsStartedSince = async (since: Date) => {
    const [row] =
      await admin`select count(*)::int as n from pg_stat_activity where datname = ${databaseName} and usename = 'gatehouse_runtime' and backend_start >= ${since}`;
    return row!.n as number;
  };
  const statSessions = async () => {
    await admin`select pg_stat_clear_snapshot()`;
    const [row] = await admin`select sessions::int as n from pg_stat_database where datname = ${databaseName}`;
    return row!.n as number;
  };

  try {
    // The bare worker: cold start and the ceiling.
    const barePort = await freePort();
    let began = performance.now();
    const bare = await startWranglerDev({
      port: barePort,
      main: join(REPO_ROOT, 'tests/perf/bench-worker-bare.ts'),
      vars: () => ({}),
      env: hyperdriveEnv,
      readyPath: null,
    });
    const bareReadyMs = performance.now() - began;
    let first = performance.now();
    await (await fetch(`${bare.url}/json`)).text();
    const bareFirstMs = performance.now() - first;
    const bareColdMs = performance.now() - began;
    if (warmup > 0) await measure(barePort, [{ method: 'GET', path: '/json' }], warmup);
    const ceiling = await measure(barePort, [{ method: 'GET', path: '/json' }], duration);
    await bare.stop();
    const ceilingRps = ceiling.requests.average;
    rows.push({
      scenario: 'W1 bare Hono worker',
      'req/s': Math.round(ceilingRps),
      'p50 ms': ceiling.latency.p50,
      'p99 ms': ceiling.latency.p99,
      non2xx: ceiling.non2xx,
      errors: ceiling.errors,
      ratio: 1,
      target: '',
      'new PG sessions/req': null,
      'cross-tenant': null,
    });
    console.error(`worker ceiling: ${Math.round(ceilingRps)} req/s`);

    // The service.
    const port = await freePort();
    const sessionsBefore = await statSessions();
    began = performance.now();
    worker = await startWranglerDev({
      port,
      readyPath: null,
      env: hyperdriveEnv,
      vars: (p) => ({
        NODE_ENV: 'production',
        AUTH_SECRET: randomSecret(40),
        AUTH_URL: `http://127.0.0.1:${p}`,
        APP_URL: ORIGIN,
        CORS_ORIGIN: ORIGIN,
        DATABASE_URL: 'postgres://unused:unused@127.0.0.1:1/unused',
        RATE_LIMIT_ENABLED: 'false',
        API_KEY_AUTH: 'enabled',
        EMAIL_API_KEY: `re_bench_${randomSecret(16)}`,
        EMAIL_API_URL: mail.url,
        LOG_LEVEL: 'warn',
      }),
    });
    const readyMs = performance.now() - began;
    first = performance.now();
    const firstHealth = await fetch(`${worker.url}/api/health`);
    await firstHealth.text();
    const firstMs = performance.now() - first;
    const coldMs = performance.now() - began;
    const steady = performance.now();
    await (await fetch(`${worker.url}/api/session`)).text();
    const secondMs = performance.now() - steady;
    notes.coldStartMs = {
      'bare worker: wrangler dev to first 200': Math.round(bareColdMs),
      'service: wrangler dev to first 200': Math.round(coldMs),
      'bare worker: wrangler ready (bundled, script evaluated)': Math.round(bareReadyMs),
      'service: wrangler ready (bundled, script evaluated)': Math.round(readyMs),
      'bare worker: first request': Math.round(bareFirstMs),
      'service: first request (config, app built once, first connection + type fetch, health probe)':
        Math.round(firstMs),
      'service: a later request (signed-out /api/session)': Math.round(secondMs * 10) / 10,
    };
    if (firstHealth.status !== 200) throw new Error(`service health: ${firstHealth.status}`);

    const a = await seedTenant(worker.url, mail);
    const b = await seedTenant(worker.url, mail);
    let crossTenant = 0;
    /** Alternates the two tenants on each connection; counts answers that hold the other tenant's marker or lack their own. */
    const twoTenants = (path: string, auth: (t: Tenant) => Record<string, string>): autocannon.Request[] =>
      [a, b].map((tenant, i) => ({
        method: 'GET' as const,
        path,
        headers: auth(tenant),
        onResponse: (status: number, body: string) => {
          if (status !== 200) return;
          const other = i === 0 ? b : a;
          if (!body.includes(tenant.marker) || body.includes(other.marker)) crossTenant += 1;
        },
      }));

    const scenario = async (name: string, target: string, requests: autocannon.Request[], checksTenants = false) => {
      if (warmup > 0) await measure(port, requests, warmup);
      await new Promise((r) => setTimeout(r, 500));
      crossTenant = 0;
      const since = new Date();
      const r = await measure(port, requests, duration);
      const started = await sessionsStartedSince(since);
      const row: WorkerRow = {
        scenario: name,
        'req/s': Math.round(r.requests.average),
        'p50 ms': r.latency.p50,
        'p99 ms': r.latency.p99,
        non2xx: r.non2xx,
        errors: r.errors,
        ratio: Math.round((r.requests.average / ceilingRps) * 1000) / 1000,
        target,
        'new PG sessions/req': r.requests.total > 0 ? Math.round((started / r.requests.total) * 10_000) / 10_000 : null,
        'cross-tenant': checksTenants ? crossTenant : null,
      };
      rows.push(row);
      console.error(`${name}: ${row['req/s']} req/s, ratio ${row.ratio}, p99 ${row['p99 ms']} ms`);
    };

    const get = (path: string, headers: Record<string, string> = {}): autocannon.Request[] => [
      { method: 'GET', path, headers },
    ];
    await scenario('W2 GET /api/health', '>= 0.5', get('/api/health'));
    await scenario('W3 GET /api/session signed out', '>= 0.5', get('/api/session'));
    await scenario(
      'W4 GET /api/session, cookie cache',
      '>= 0.3',
      [a, b].map((t) => ({ method: 'GET' as const, path: '/api/session', headers: { cookie: t.cookie } })),
    );
    await scenario(
      'W5 GET /api/session, token only',
      '',
      [a, b].map((t) => ({ method: 'GET' as const, path: '/api/session', headers: { cookie: t.tokenOnlyCookie } })),
    );
    await scenario(
      'W6 GET /api/roles, two tenants',
      '>= 0.15',
      twoTenants('/api/roles', (t) => ({ cookie: t.cookie })),
      true,
    );
    await scenario(
      'W7 GET /api/roles with an API key, two tenants',
      '',
      twoTenants('/api/roles', (t) => ({ authorization: `Bearer ${t.apiKey}` })),
      true,
    );
    let counter = 0;
    await scenario('W8 POST+DELETE /api/roles (per pair)', 'no errors', [
      {
        method: 'POST',
        path: '/api/roles',
        headers: { cookie: a.cookie, origin: ORIGIN, 'content-type': 'application/json' },
        setupRequest: (req) => {
          counter += 1;
          return {
            ...req,
            body: JSON.stringify({ name: `bench role ${process.pid} ${counter}`, permissions: ['roles:read'] }),
          };
        },
        onResponse: (status, body, context) => {
          if (status === 201) (context as Record<string, unknown>).roleId = (JSON.parse(body) as { id: string }).id;
        },
      },
      {
        method: 'DELETE',
        headers: { cookie: a.cookie, origin: ORIGIN },
        setupRequest: (req, context) => ({
          ...req,
          path: `/api/roles/${String((context as Record<string, unknown>).roleId)}`,
        }),
      },
    ]);
    // workerd's complaints about promises or I/O crossing requests (there should be none).
    notes.crossRequestWarnings = (worker.log().match(/different request|Cannot perform I\/O on behalf/g) ?? []).length;
    await worker.stop();
    worker = undefined;
    // pg_stat_database counts a session when its backend reports; idle backends report within ~10 s.
    await new Promise((r) => setTimeout(r, 11_000));
    const sessionsAfter = await statSessions();
    const total = rows.slice(1).reduce((sum, row) => sum + row['req/s'] * duration, 0);
    notes.pgSessions = {
      'pg_stat_database.sessions, whole Worker run (seeding and warm-ups included)': sessionsAfter - sessionsBefore,
      'measured requests (approx.)': Math.round(total),
    };
    notes.evaluationInNode = await evaluationTimes();
    return { rows, notes };
  } finally {
    await worker?.stop();
    await mail.close();
    await releaseDatabase(TEST_POOLER_URL, databaseName).catch(() => {});
    await admin.unsafe(`drop database if exists "${databaseName}" with (force)`).catch(() => {});
    await admin.end();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = new Map<string, string>();
  for (let i = 2; i < process.argv.length; i += 2)
    args.set(process.argv[i]!.replace(/^--/, ''), process.argv[i + 1] ?? '');
  runWorkerBench({
    duration: Number(args.get('duration') ?? 10),
    connections: Number(args.get('connections') ?? 50),
    warmup: Number(args.get('warmup') ?? 2),
  })
    .then((result) => {
      if ('skipped' in result) console.log(result.skipped);
      else {
        console.table(result.rows);
        console.log(JSON.stringify(result.notes, null, 2));
      }
    })
    .catch((error) => {
      console.error(error);
      process.exit(1);
    });
}
