/**
 * The fault tests' world: throwaway PostgreSQL and Redis (servers.ts), the
 * Upstash-protocol test server in front of that Redis, and the service in a
 * child process (app-child.ts) talked to over real HTTP on loopback. Users
 * and organizations are made through the API (the mailed link is read from
 * the child's log lines, as docs/api.md "Email" says).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import {
  type Answer,
  type LiveRequestOptions,
  type LiveUser,
  liveClient,
  type Mail,
  mailedLink,
  pathAndQuery,
  signUpVerifySignIn,
} from '../../support/live-client.js';
import { eachLine } from '../../support/process.js';
import { startUpstashServer, type UpstashServer } from '../../support/upstash-server.js';
import { type PostgresServer, type RedisServer, startPostgres, startRedis } from './servers.js';

export { APP_ORIGIN as ORIGIN, PASSWORD } from '../../support/live-client.js';
export type { Answer };

const CHILD = fileURLToPath(new URL('./app-child.ts', import.meta.url));

export interface Service {
  port: number;
  child: ChildProcess;
  /** Parsed log lines (access lines counted, not kept). */
  lines: Record<string, any>[];
  requestLines: number;
  base: string;
  request(path: string, options?: LiveRequestOptions): Promise<Answer>;
  alive(): boolean;
  rssKb(): Promise<number>;
  stop(): Promise<void>;
}

export async function startService(env: Record<string, string>): Promise<Service> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      NODE_ENV: 'test',
      AUTH_SECRET: `faults-${crypto.randomUUID()}-${crypto.randomUUID()}`,
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, any>[] = [];
  let requestLines = 0;
  let resolvePort: (port: number) => void;
  const portPromise = new Promise<number>((resolve) => (resolvePort = resolve));
  eachLine(child, (line) => {
    let parsed: Record<string, any>;
    try {
      parsed = JSON.parse(line);
    } catch {
      lines.push({ event: 'raw', text: line });
      return;
    }
    if (parsed.event === 'child.listening') resolvePort(parsed.port);
    if (parsed.event === 'request') requestLines += 1;
    else lines.push(parsed);
  });
  const port = await Promise.race([
    portPromise,
    new Promise<never>((_, reject) =>
      child.once('exit', (code) => reject(new Error(`service exited (${code}): ${JSON.stringify(lines.slice(-5))}`))),
    ),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`service did not start: ${JSON.stringify(lines.slice(-5))}`)), 120_000).unref(),
    ),
  ]);

  const service: Service = {
    port,
    base: `http://127.0.0.1:${port}`,
    child,
    lines,
    get requestLines() {
      return requestLines;
    },
    request: liveClient(`http://127.0.0.1:${port}`).request,
    alive: () => child.exitCode === null && child.signalCode === null,
    async rssKb() {
      const { readFile } = await import('node:fs/promises');
      const status = await readFile(`/proc/${child.pid}/status`, 'utf8');
      return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (!service.alive()) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      }),
  };
  return service;
}

/** The link in the newest mail to `email`, as path and query. */
export async function mailedPath(service: Service, email: string, subject: RegExp): Promise<string> {
  return pathAndQuery(await mailedLink(() => emailsOf(service), email, subject, 5000));
}

/** The mails the child's development mailer logged. */
function emailsOf(service: Service): Mail[] {
  return service.lines
    .filter((line) => line.event === 'email')
    .map((line) => ({ to: String(line.to), subject: String(line.subject), text: String(line.text) }));
}

export type User = LiveUser;

/** Sign-up, the mailed verification link, sign-in. */
export function signedUpUser(service: Service, label = 'user'): Promise<User> {
  return signUpVerifySignIn(service, () => emailsOf(service), { label });
}

/** A new organization, made the user's active one. */
export async function organizationOf(service: Service, user: User): Promise<string> {
  const slug = `org-${crypto.randomUUID().slice(0, 12)}`;
  const created = await service.request('/api/auth/organization/create', { body: { name: slug, slug }, jar: user.jar });
  if (created.status !== 200) throw new Error(`organization ${created.status} ${created.text}`);
  const active = await service.request('/api/auth/organization/set-active', {
    body: { organizationId: created.body.id },
    jar: user.jar,
  });
  if (active.status !== 200) throw new Error(`set-active ${active.status} ${active.text}`);
  return created.body.id as string;
}

export interface World {
  pg: PostgresServer;
  redis: RedisServer;
  upstash: UpstashServer;
  service: Service;
  /** A superuser client: reads every row whatever row-level security says. */
  inspect(): postgres.Sql;
  destroy(): Promise<void>;
}

/** Servers, store and service; `env` adds to (or overrides) the service's environment. */
export async function startWorld(env: Record<string, string> = {}): Promise<World> {
  const pg = await startPostgres();
  const redis = await startRedis();
  const token = crypto.randomUUID();
  const upstash = await startUpstashServer({ redisUrl: redis.url, token });
  const service = await startService({
    DATABASE_URL: pg.appUrl,
    DATABASE_MIGRATION_URL: pg.ownerUrl,
    KV_REST_API_URL: upstash.url,
    KV_REST_API_TOKEN: token,
    RATE_LIMIT_ENABLED: 'true',
    // High budgets: the tests meet the store's failure rules, never its limits.
    RATE_LIMIT_GLOBAL_LIMIT: '100000',
    RATE_LIMIT_AUTH_LIMIT: '100000',
    ...env,
  });
  let inspector: postgres.Sql | null = null;
  return {
    pg,
    redis,
    upstash,
    service,
    inspect() {
      inspector ??= postgres({ ...pg.superuser, max: 2, onnotice: () => {}, connect_timeout: 5 });
      return inspector;
    },
    async destroy() {
      await service.stop().catch(() => {});
      await inspector?.end({ timeout: 1 }).catch(() => {});
      await upstash.close().catch(() => {});
      await redis.destroy().catch(() => {});
      await pg.destroy().catch(() => {});
    },
  };
}

/**
 * Nothing half-written: every organization has an Owner (by role, in step
 * with the plugin's role string), every member a role, and every committed
 * mutation its audit entry.
 */
export async function consistencyProblems(sql: postgres.Sql): Promise<string[]> {
  const problems: string[] = [];
  const check = async (label: string, rows: Promise<postgres.RowList<postgres.Row[]>>) => {
    const found = await rows;
    if (found.length)
      problems.push(
        `${label}: ${JSON.stringify(found.slice(0, 5))}${found.length > 5 ? ` (+${found.length - 5})` : ''}`,
      );
  };
  await check(
    'organizations without an Owner',
    sql`select o.id from organizations o where not exists (
      select 1 from members m join roles r on r.id = m.role_id
      where m.organization_id = o.id and r.slug = 'owner' and r.is_default and m.role = 'owner')`,
  );
  await check(
    'organizations without their four default roles',
    sql`select o.id from organizations o where (select count(*) from roles r where r.tenant_id = o.id and r.is_default) <> 4`,
  );
  await check('members without a role', sql`select id from members where role_id is null`);
  await check(
    'custom roles without role.created',
    sql`select r.id from roles r where not r.is_default and not exists (
      select 1 from audit_logs a where a.action = 'role.created' and a.tenant_id = r.tenant_id and a.metadata->>'roleId' = r.id::text)`,
  );
  await check(
    'keys without api_key.created',
    sql`select k.id from api_keys k where not exists (
      select 1 from audit_logs a where a.action = 'api_key.created' and a.tenant_id = k.tenant_id and a.metadata->>'keyId' = k.id::text)`,
  );
  await check(
    'revoked keys without exactly one api_key.revoked',
    sql`select k.id from api_keys k where k.revoked_at is not null and (
      select count(*) from audit_logs a where a.action = 'api_key.revoked' and a.tenant_id = k.tenant_id and a.metadata->>'keyId' = k.id::text) <> 1`,
  );
  await check(
    'api_key.revoked entries for keys that are not revoked',
    sql`select a.id from audit_logs a join api_keys k on a.metadata->>'keyId' = k.id::text where a.action = 'api_key.revoked' and k.revoked_at is null`,
  );
  await check(
    'role.created entries for roles that do not exist (and were not deleted)',
    sql`select a.id from audit_logs a where a.action = 'role.created' and not exists (select 1 from roles r where r.id::text = a.metadata->>'roleId')
      and not exists (select 1 from audit_logs d where d.action = 'role.deleted' and d.metadata->>'roleId' = a.metadata->>'roleId')`,
  );
  return problems;
}

/** What is wrong with an answer during a fault, if anything: it must be `ok` or a 503 in the contract's shape. */
export function faultAnswerProblems(answer: Answer, ok: (status: number) => boolean): string | null {
  if (ok(answer.status)) return null;
  const body = answer.body;
  const shaped =
    body &&
    typeof body === 'object' &&
    body.code === 'SERVICE_UNAVAILABLE' &&
    typeof body.message === 'string' &&
    Object.keys(body).every((key) => ['code', 'message', 'details'].includes(key));
  if (answer.status === 503 && shaped) return null;
  return `${answer.method} ${answer.path}: ${answer.status} ${answer.text.slice(0, 200)}`;
}
