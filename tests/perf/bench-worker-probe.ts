/**
 * Sequential latencies of the Worker's routes (30 each) and a CPU profile of workerd (DevTools protocol) while
 * autocannon drives the cookie-cached /api/session: what bounds the Worker's scenarios. Needs .ci/services.sh's servers.
 * `npx tsx tests/perf/bench-worker-probe.ts [direct]` (direct: PostgreSQL without the pooler).
 */

import autocannon from 'autocannon';
import postgres from 'postgres';
import { openPostgres } from '../../src/db/client.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { releaseDatabase } from '../e2e/support/pooler.js';
import { startMailCapture } from '../e2e/support/servers.js';
import { randomSecret, startWranglerDev } from '../e2e/support/wrangler.js';
import { freePort } from '../support/process.js';
import { seedTenant } from './bench-worker.js';
import { profileWhile } from './bench-worker-profile.js';

const w = (u: string, n: string) => {
  const p = new URL(u);
  p.pathname = `/${n}`;
  return p.toString();
};
const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: source .ci/services.sh && services_start`);
  return value;
};
const [TEST_PG_URL, TEST_POOLER_URL, TEST_POOLER_APP_URL, TEST_PG_APP_URL] = [
  'TEST_PG_URL',
  'TEST_POOLER_URL',
  'TEST_POOLER_APP_URL',
  'TEST_PG_APP_URL',
].map(env) as [string, string, string, string];
const name = `gh_probe_${crypto.randomUUID().replaceAll('-', '')}`;
const admin = postgres(TEST_PG_URL, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database "${name}"`);
const d = await openPostgres({ url: w(TEST_PG_APP_URL, name), migrationUrl: w(TEST_PG_URL, name), poolMax: 1 });
await migrateToLatest(d);
await d.close();
const mail = await startMailCapture();
const port = await freePort();
const direct = process.argv[2] === 'direct';
const worker = await startWranglerDev({
  port,
  env: {
    CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE: w(direct ? TEST_PG_APP_URL : TEST_POOLER_APP_URL, name),
  },
  vars: (p) => ({
    NODE_ENV: 'production',
    AUTH_SECRET: randomSecret(40),
    AUTH_URL: `http://127.0.0.1:${p}`,
    APP_URL: 'http://localhost:3000',
    CORS_ORIGIN: 'http://localhost:3000',
    RATE_LIMIT_ENABLED: 'false',
    API_KEY_AUTH: 'enabled',
    EMAIL_API_KEY: 're_x',
    EMAIL_API_URL: mail.url,
    LOG_LEVEL: 'warn',
  }),
});
try {
  const t = await seedTenant(worker.url, mail);
  const time = async (label: string, path: string, headers: Record<string, string> = {}) => {
    const xs: number[] = [];
    for (let i = 0; i < 30; i++) {
      const s = performance.now();
      const r = await fetch(worker.url + path, { headers });
      await r.text();
      xs.push(performance.now() - s);
      if (r.status !== 200) console.log(label, r.status);
    }
    xs.sort((a, b) => a - b);
    console.log(label.padEnd(30), 'median', xs[15]!.toFixed(1), 'ms  min', xs[0]!.toFixed(1));
  };
  await time('health', '/api/health');
  await time('session out', '/api/session');
  await time('session cookie', '/api/session', { cookie: t.cookie });
  await time('session token', '/api/session', { cookie: t.tokenOnlyCookie });
  await time('roles', '/api/roles', { cookie: t.cookie });
  await time('roles key', '/api/roles', { authorization: `Bearer ${t.apiKey}` });
  const prof = await profileWhile(
    worker.inspectorPort,
    () =>
      autocannon({
        url: worker.url,
        connections: 10,
        duration: 5,
        requests: [{ method: 'GET', path: '/api/session', headers: { cookie: t.cookie } }],
      }),
    30,
    worker.dir,
  );
  console.log(JSON.stringify(prof, null, 1));
} finally {
  await worker.stop();
  await mail.close();
  await releaseDatabase(TEST_POOLER_URL, name).catch(() => {});
  await admin.unsafe(`drop database "${name}" with (force)`);
  await admin.end();
}
