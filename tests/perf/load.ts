/**
 * `npm run load`: a bounded load test of many tenants (docs/security.md "Load").
 *
 * Starts the service as a child process listening on 127.0.0.1 only (this
 * same file with `--serve`), makes `--tenants` organizations through the API
 * (an Owner and `--members` members each, every user signed in once), then
 * runs `--concurrency` workers of mixed traffic for `--seconds` (default 120)
 * and stops by itself: reads of roles, members, keys, audit logs, session and
 * profile by every member; role, key and member-role writes by the Owners.
 *
 * Checked on every response: the expected status (the error count must be
 * zero) and that no id of another tenant appears in it (every id the run
 * has seen is attributed to its tenant). Sampled every second: the child's
 * RSS. After the warm-up it must be flat: the median of the last third of
 * the samples at most `--max-growth` percent above the median of the first
 * third (garbage collection moves RSS by tens of MB either way, so a
 * least-squares slope is reported, not judged). Judged when at least 60 s
 * remain after the warm-up; shorter runs (CI's) report it only.
 *
 * Database: a fresh database on the PostgreSQL server named by TEST_PG_URL
 * (owner) and TEST_PG_APP_URL (runtime), dropped afterwards, as `.ci/run`
 * provides; otherwise the embedded engine in memory (whose RSS then holds the
 * data too). Rate limiting runs on the in-memory store with budgets the run
 * never reaches. Exit code 1 when any check fails. Results: a summary on
 * stdout and JSON in bench-results/ (git-ignored).
 *
 * Options: --seconds 120 --tenants 12 --members 2 --concurrency 16
 *          --warmup 0.3 (fraction of the run before memory is judged) --max-growth 10
 *          --step-up-max-age 600 (the service's STEP_UP_MAX_AGE: an Owner whose
 *          sign-in is older proves the password again before minting a key)
 */
import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import {
  type Answer,
  type CookieJar,
  expectStatus,
  liveClient,
  type Mail,
  mailedLink,
  PASSWORD,
  signUpVerifySignIn,
} from '../support/live-client.js';
import { eachLine } from '../support/process.js';

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  if (index < 0) return fallback;
  const value = Number(process.argv[index + 1]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`);
  return value;
}

// ---------------------------------------------------------------------------
// --serve: the child. The Node entry's recipe, on loopback.
// ---------------------------------------------------------------------------

async function serveChild(): Promise<void> {
  const [
    { serve },
    { createApp },
    { parseConfig },
    { migrateToLatest },
    deps,
    { createLogger },
    { answerClientErrors, LISTENER_OPTIONS },
  ] = await Promise.all([
    import('@hono/node-server'),
    import('../../src/app.js'),
    import('../../src/shared/config.js'),
    import('../../src/db/migrate.js'),
    import('../../src/entries/deps.js'),
    import('../../src/shared/logger.js'),
    import('../../src/entries/node-listener.js'),
  ]);
  const { config, warnings } = parseConfig(process.env);
  const logger = createLogger({ level: config.logLevel });
  deps.logConfigWarnings(logger, warnings);
  const database = await deps.openConfiguredDatabase(config);
  await migrateToLatest(database, logger);
  const app = createApp(
    { config, database, rateLimitStore: deps.createRateLimitStore(config), logger },
    { clientIp: () => '127.0.0.1' },
  );
  const server = serve(
    { fetch: app.fetch, port: 0, hostname: '127.0.0.1', serverOptions: { ...LISTENER_OPTIONS } },
    (info) => {
      console.log(JSON.stringify({ event: 'load.listening', port: info.port }));
    },
  );
  answerClientErrors(server);
  const stop = () => server.close(() => void database.close().finally(() => process.exit(0)));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// ---------------------------------------------------------------------------
// The parent: setup, traffic, checks, report.
// ---------------------------------------------------------------------------

interface Actor {
  email: string;
  id: string;
  jar: CookieJar;
  memberId: string;
  owner: boolean;
}

interface Tenant {
  index: number;
  organizationId: string;
  owner: Actor;
  members: Actor[];
  roles: { member: string; viewer: string };
  customRoles: string[];
  keys: string[];
  /** Serializes this tenant's writes: each worker's write sees the tenant's last state. */
  writing: Promise<unknown>;
}

interface Stats {
  requests: number;
  latencies: number[];
  byOperation: Record<string, { count: number; errors: number }>;
  errors: { operation: string; status: number; text: string }[];
  violations: { operation: string; tenant: number; foreignId: string; owner: number }[];
}

async function main(): Promise<void> {
  const seconds = option('seconds', 120);
  const tenantCount = Math.round(option('tenants', 12));
  const memberCount = Math.round(option('members', 2));
  const concurrency = Math.round(option('concurrency', 16));
  const warmupFraction = option('warmup', 0.3);
  const maxGrowth = option('max-growth', 10);

  // Database: a fresh one on the server when the CI servers are known, else the embedded engine.
  const ownerUrl = process.env.TEST_PG_URL;
  const appUrl = process.env.TEST_PG_APP_URL;
  const databaseName = `gatehouse_load_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const withName = (url: string) => Object.assign(new URL(url), { pathname: `/${databaseName}` }).toString();
  let engine = 'pglite (memory)';
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    NODE_ENV: 'test',
    AUTH_SECRET: `load-${crypto.randomUUID()}-${crypto.randomUUID()}`,
    LOG_LEVEL: 'info',
    DOCS_ENABLED: 'false',
    RATE_LIMIT_ENABLED: 'true',
    RATE_LIMIT_GLOBAL_LIMIT: '1000000',
    RATE_LIMIT_AUTH_LIMIT: '1000000',
    DATABASE_POOL_MAX: '10',
    STEP_UP_MAX_AGE: String(option('step-up-max-age', 600)),
  };
  if (ownerUrl && appUrl) {
    const admin = postgres(ownerUrl, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database "${databaseName}"`);
    await admin.end();
    env.DATABASE_URL = withName(appUrl);
    env.DATABASE_MIGRATION_URL = withName(ownerUrl);
    engine = 'postgresql (fresh database)';
  } else {
    env.DATABASE_URL = 'pglite://memory';
  }

  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const mails: Mail[] = [];
  const problems: string[] = [];
  let portResolve!: (port: number) => void;
  const portPromise = new Promise<number>((resolve) => (portResolve = resolve));
  eachLine(child, (line) => {
    if (!line.startsWith('{')) return;
    try {
      const parsed = JSON.parse(line) as Record<string, any>;
      if (parsed.event === 'load.listening') portResolve(parsed.port);
      else if (parsed.event === 'email') mails.push({ to: parsed.to, subject: parsed.subject, text: parsed.text });
      else if (parsed.level === 'error') problems.push(`server error log: ${line.slice(0, 300)}`);
    } catch {
      // not a log line
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  let stopped = false;
  const cleanup = async () => {
    if (stopped) return;
    stopped = true;
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    if (ownerUrl && appUrl) {
      const admin = postgres(ownerUrl, { max: 1, onnotice: () => {} });
      await admin.unsafe(`drop database if exists "${databaseName}" with (force)`).catch(() => {});
      await admin.end();
    }
  };
  process.on('SIGINT', () => void cleanup().then(() => process.exit(130)));

  try {
    const port = await Promise.race([
      portPromise,
      exited.then((code) => Promise.reject(new Error(`the service exited (${code}) before listening`))),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error('the service did not start in 120 s')), 120_000).unref(),
      ),
    ]);
    // Loopback only: the target is always the child's own loopback listener.
    const base = `http://127.0.0.1:${port}`;

    const { request } = liveClient(base);
    const mailLink = (to: string, subject: RegExp) => mailedLink(() => mails, to, subject);

    /** Every id this run has seen, and the tenant it belongs to. */
    const idOwner = new Map<string, number>();
    const claim = (tenant: number, ...ids: (string | undefined | null)[]) => {
      for (const id of ids) if (id) idOwner.set(id.toLowerCase(), tenant);
    };

    const newUser = (label: string) =>
      signUpVerifySignIn({ base, request }, () => mails, {
        email: `load-${label}-${crypto.randomUUID().slice(0, 10)}@example.test`,
        label,
      });

    const setupTenant = async (index: number): Promise<Tenant> => {
      const founder = await newUser(`t${index}-owner`);
      const slug = `load-${index}-${crypto.randomUUID().slice(0, 8)}`;
      const organization = expectStatus(
        'organization',
        await request('/api/auth/organization/create', { body: { name: `Load ${index}`, slug }, jar: founder.jar }),
        200,
      );
      expectStatus(
        'set-active',
        await request('/api/auth/organization/set-active', {
          body: { organizationId: organization.id },
          jar: founder.jar,
        }),
        200,
      );
      const members: Actor[] = [];
      for (let m = 0; m < memberCount; m += 1) {
        const user = await newUser(`t${index}-m${m}`);
        expectStatus(
          'invite',
          await request('/api/auth/organization/invite-member', {
            body: { email: user.email, role: 'member', organizationId: organization.id },
            jar: founder.jar,
          }),
          200,
        );
        const invitationId = (await mailLink(user.email, /^Join /)).pathname.split('/').at(-1)!;
        const accepted = expectStatus(
          'accept',
          await request('/api/auth/organization/accept-invitation', { body: { invitationId }, jar: user.jar }),
          200,
        );
        expectStatus(
          'set-active',
          await request('/api/auth/organization/set-active', {
            body: { organizationId: organization.id },
            jar: user.jar,
          }),
          200,
        );
        members.push({ ...user, memberId: accepted.member.id, owner: false });
        claim(index, invitationId);
      }
      const listed = expectStatus('members', await request('/api/members', { jar: founder.jar }), 200) as {
        id: string;
        userId: string;
      }[];
      const owner: Actor = { ...founder, memberId: listed.find((m) => m.userId === founder.id)!.id, owner: true };
      const roles = expectStatus('roles', await request('/api/roles', { jar: founder.jar }), 200) as {
        id: string;
        slug: string;
      }[];
      claim(
        index,
        organization.id,
        owner.id,
        owner.memberId,
        ...members.flatMap((m) => [m.id, m.memberId]),
        ...roles.map((r) => r.id),
      );
      return {
        index,
        organizationId: organization.id,
        owner,
        members,
        roles: {
          member: roles.find((r) => r.slug === 'member')!.id,
          viewer: roles.find((r) => r.slug === 'viewer')!.id,
        },
        customRoles: [],
        keys: [],
        writing: Promise.resolve(),
      };
    };

    const setupStarted = performance.now();
    const tenants: Tenant[] = [];
    for (let i = 0; i < tenantCount; i += 4) {
      tenants.push(
        ...(await Promise.all(Array.from({ length: Math.min(4, tenantCount - i) }, (_, k) => setupTenant(i + k)))),
      );
    }
    const setupSeconds = (performance.now() - setupStarted) / 1000;
    console.log(
      `load: ${tenants.length} tenants, ${tenants.length * (memberCount + 1)} users signed in, in ${setupSeconds.toFixed(1)} s (${engine}); running ${seconds} s with ${concurrency} workers`,
    );

    const stats: Stats = { requests: 0, latencies: [], byOperation: {}, errors: [], violations: [] };
    const record = (operation: string, tenant: Tenant, answer: Answer, expected: number[]) => {
      stats.requests += 1;
      stats.latencies.push(answer.ms);
      stats.byOperation[operation] ??= { count: 0, errors: 0 };
      const entry = stats.byOperation[operation];
      entry.count += 1;
      if (!expected.includes(answer.status)) {
        entry.errors += 1;
        if (stats.errors.length < 20)
          stats.errors.push({ operation, status: answer.status, text: answer.text.slice(0, 300) });
      }
      for (const match of answer.text.matchAll(UUID)) {
        const owner = idOwner.get(match[0].toLowerCase());
        if (owner !== undefined && owner !== tenant.index)
          stats.violations.push({ operation, tenant: tenant.index, foreignId: match[0], owner });
      }
    };

    type Operation = (tenant: Tenant, actor: Actor) => Promise<void>;
    const read =
      (path: string): Operation =>
      async (tenant, actor) =>
        record(`GET ${path.split('?')[0]}`, tenant, await request(path, { jar: actor.jar }), [200]);
    const write =
      (operation: Operation): Operation =>
      (tenant) => {
        // An Owner's writes run one at a time per tenant, so each sees the tenant's last state.
        const next = tenant.writing.then(() => operation(tenant, tenant.owner));
        tenant.writing = next.catch(() => {});
        return next;
      };
    const operations: [number, Operation][] = [
      [6, read('/api/roles')],
      [5, read('/api/members')],
      [4, read('/api/api-keys')],
      [3, read('/api/audit-logs?limit=20')],
      [4, read('/api/session')],
      [2, read('/api/users/me')],
      [
        2,
        write(async (tenant, owner) => {
          if (tenant.customRoles.length >= 4) {
            const id = tenant.customRoles.shift()!;
            record(
              'DELETE /api/roles/:id',
              tenant,
              await request(`/api/roles/${id}`, { method: 'DELETE', jar: owner.jar }),
              [200],
            );
            return;
          }
          const answer = await request('/api/roles', {
            body: { name: `Load role ${crypto.randomUUID().slice(0, 8)}`, permissions: ['roles:read', 'members:read'] },
            jar: owner.jar,
          });
          if (answer.status === 201) {
            claim(tenant.index, answer.body.id);
            tenant.customRoles.push(answer.body.id);
          }
          record('POST /api/roles', tenant, answer, [201]);
        }),
      ],
      [
        2,
        write(async (tenant, owner) => {
          const id = tenant.customRoles[0];
          if (!id) return;
          record(
            'PATCH /api/roles/:id',
            tenant,
            await request(`/api/roles/${id}`, {
              method: 'PATCH',
              body: { description: `changed ${Date.now()}` },
              jar: owner.jar,
            }),
            [200],
          );
        }),
      ],
      [
        2,
        write(async (tenant, owner) => {
          if (tenant.keys.length >= 4) {
            const id = tenant.keys.shift()!;
            record(
              'DELETE /api/api-keys/:id',
              tenant,
              await request(`/api/api-keys/${id}`, { method: 'DELETE', jar: owner.jar }),
              [200],
            );
            return;
          }
          const create = () =>
            request('/api/api-keys', {
              body: { name: `load key ${Date.now()}`, scopes: ['roles:read'] },
              jar: owner.jar,
            });
          let answer = await create();
          // A sensitive action: the owner's password sign-in counts for STEP_UP_MAX_AGE (600 s), less than
          // a long run (docs/security.md "Sensitive actions and step-up"); it proves the password again, as a client does.
          if (answer.status === 403 && answer.body?.code === 'STEP_UP_REQUIRED') {
            record(
              'POST /api/session/step-up',
              tenant,
              await request('/api/session/step-up', { body: { password: PASSWORD }, jar: owner.jar }),
              [200],
            );
            answer = await create();
          }
          if (answer.status === 201) {
            claim(tenant.index, answer.body.id);
            tenant.keys.push(answer.body.id);
          }
          record('POST /api/api-keys', tenant, answer, [201]);
        }),
      ],
      [
        2,
        write(async (tenant, owner) => {
          const member = tenant.members[Math.floor(Math.random() * tenant.members.length)];
          if (!member) return;
          const current = Math.random() < 0.5 ? tenant.roles.viewer : tenant.roles.member;
          record(
            'PATCH /api/admin/members/:id',
            tenant,
            await request(`/api/admin/members/${member.memberId}`, {
              method: 'PATCH',
              body: { roleId: current },
              jar: owner.jar,
            }),
            [200],
          );
        }),
      ],
    ];
    const totalWeight = operations.reduce((sum, [weight]) => sum + weight, 0);
    const pick = (): Operation => {
      let roll = Math.random() * totalWeight;
      for (const [weight, operation] of operations) {
        roll -= weight;
        if (roll < 0) return operation;
      }
      return operations[0]![1];
    };

    // Memory of the child, sampled every second.
    const samples: { atSeconds: number; rssMb: number }[] = [];
    const trafficStarted = performance.now();
    const rssMb = async () => {
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8').catch(() => '');
      return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
    };
    const sampler = setInterval(() => {
      void rssMb().then(
        (mb) => mb > 0 && samples.push({ atSeconds: (performance.now() - trafficStarted) / 1000, rssMb: mb }),
      );
    }, 1000);

    const deadline = trafficStarted + seconds * 1000;
    const worker = async () => {
      while (performance.now() < deadline && child.exitCode === null) {
        const tenant = tenants[Math.floor(Math.random() * tenants.length)]!;
        const actors = [tenant.owner, ...tenant.members];
        const actor = actors[Math.floor(Math.random() * actors.length)]!;
        try {
          await pick()(tenant, actor);
        } catch (error) {
          stats.requests += 1;
          if (stats.errors.length < 20) stats.errors.push({ operation: 'transport', status: 0, text: String(error) });
          stats.byOperation.transport ??= { count: 0, errors: 0 };
          stats.byOperation.transport.errors += 1;
        }
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    clearInterval(sampler);
    const elapsed = (performance.now() - trafficStarted) / 1000;
    if (child.exitCode !== null) problems.push(`the service exited (${child.exitCode}) during the run`);

    // Memory after the warm-up: least-squares slope (reported) and growth between the first and last thirds (judged).
    const warmupSeconds = Math.max(5, seconds * warmupFraction);
    const steady = samples.filter((s) => s.atSeconds >= warmupSeconds);
    const slope = (() => {
      if (steady.length < 3) return 0;
      const n = steady.length;
      const mx = steady.reduce((a, s) => a + s.atSeconds, 0) / n;
      const my = steady.reduce((a, s) => a + s.rssMb, 0) / n;
      const num = steady.reduce((a, s) => a + (s.atSeconds - mx) * (s.rssMb - my), 0);
      const den = steady.reduce((a, s) => a + (s.atSeconds - mx) ** 2, 0);
      return den ? (num / den) * 60 : 0;
    })();
    const medianOf = (values: number[]) => {
      const sorted = [...values].sort((a, b) => a - b);
      return sorted.length ? sorted[Math.floor(sorted.length / 2)]! : 0;
    };
    const third = Math.floor(steady.length / 3);
    const firstThird = medianOf(steady.slice(0, third).map((s) => s.rssMb));
    const lastThird = medianOf(steady.slice(steady.length - third).map((s) => s.rssMb));
    const growthPercent = firstThird ? ((lastThird - firstThird) / firstThird) * 100 : 0;
    const steadySeconds = steady.length ? steady.at(-1)!.atSeconds - steady[0]!.atSeconds : 0;
    const memoryJudged = steadySeconds >= 60;
    const percentile = (p: number) => {
      const sorted = [...stats.latencies].sort((a, b) => a - b);
      return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : 0;
    };
    const errorCount = Object.values(stats.byOperation).reduce((sum, entry) => sum + entry.errors, 0);
    const report = {
      engine,
      seconds: Math.round(elapsed),
      tenants: tenants.length,
      users: tenants.length * (memberCount + 1),
      concurrency,
      requests: stats.requests,
      requestsPerSecond: Math.round(stats.requests / elapsed),
      latencyMs: {
        p50: Math.round(percentile(50) * 10) / 10,
        p95: Math.round(percentile(95) * 10) / 10,
        p99: Math.round(percentile(99) * 10) / 10,
      },
      errors: errorCount,
      crossTenant: stats.violations.length,
      idsTracked: idOwner.size,
      memory: {
        samples: samples.length,
        warmupSeconds: Math.round(warmupSeconds),
        rssMbAfterWarmup: Math.round(steady[0]?.rssMb ?? 0),
        rssMbAtEnd: Math.round(samples.at(-1)?.rssMb ?? 0),
        rssMbPeak: Math.round(Math.max(0, ...samples.map((s) => s.rssMb))),
        slopeMbPerMinute: Math.round(slope * 100) / 100,
        firstThirdMedianMb: Math.round(firstThird),
        lastThirdMedianMb: Math.round(lastThird),
        growthPercent: Math.round(growthPercent * 10) / 10,
        maxGrowthPercent: maxGrowth,
        judged: memoryJudged,
        /** RSS every 10 s of traffic. */
        curve: samples.filter((_, i) => i % 10 === 0).map((s) => Math.round(s.rssMb)),
      },
      byOperation: stats.byOperation,
      errorSamples: stats.errors.slice(0, 5),
      crossTenantSamples: stats.violations.slice(0, 5),
      serverErrorLogs: problems.slice(0, 5),
    };

    if (errorCount > 0) problems.push(`${errorCount} requests answered other than expected`);
    if (stats.violations.length > 0) problems.push(`${stats.violations.length} responses carried another tenant's ids`);
    if (memoryJudged && growthPercent > maxGrowth)
      problems.push(`RSS grew ${growthPercent.toFixed(1)}% after the warm-up (limit ${maxGrowth}%)`);
    if (stats.requests === 0) problems.push('no requests were made');

    console.log('');
    console.log(
      `requests        ${report.requests} in ${report.seconds} s (${report.requestsPerSecond}/s), p50 ${report.latencyMs.p50} ms, p95 ${report.latencyMs.p95} ms, p99 ${report.latencyMs.p99} ms`,
    );
    console.log(`errors          ${report.errors}`);
    console.log(`cross-tenant    ${report.crossTenant} (ids tracked: ${report.idsTracked})`);
    console.log(
      `rss (MB)        ${report.memory.rssMbAfterWarmup} after warm-up (${report.memory.warmupSeconds} s), ${report.memory.rssMbAtEnd} at the end, peak ${report.memory.rssMbPeak}; ` +
        `median ${report.memory.firstThirdMedianMb} -> ${report.memory.lastThirdMedianMb} (${report.memory.growthPercent}%, limit ${maxGrowth}%${memoryJudged ? '' : ', not judged: under 60 s after the warm-up'}); slope ${report.memory.slopeMbPerMinute} MB/min`,
    );
    for (const [operation, entry] of Object.entries(stats.byOperation).sort())
      console.log(`  ${operation.padEnd(32)} ${String(entry.count).padStart(7)}  errors ${entry.errors}`);
    console.log(JSON.stringify({ event: 'load.result', ...report }));
    await mkdir('bench-results', { recursive: true });
    await writeFile(
      `bench-results/load-${new Date().toISOString().replaceAll(':', '-')}.json`,
      `${JSON.stringify(report, null, 2)}\n`,
    );
  } finally {
    await cleanup();
  }
  if (problems.length > 0) {
    console.error(`load: FAILED\n  ${problems.join('\n  ')}`);
    process.exitCode = 1;
  } else {
    console.log('load: passed');
  }
}

if (process.argv.includes('--serve')) {
  await serveChild();
} else {
  await main();
}
