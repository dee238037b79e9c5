import { spawn } from 'node:child_process';
import { existsSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TEST_SECRET } from './support/app.js';
import { eachLine, freePort } from './support/process.js';

const ROOT = join(import.meta.dirname, '..');
const OUTFILE = join(ROOT, 'dist', 'node', 'server.js');

/** `npm start`: node scripts/start.mjs, until /api/health answers 200; then SIGTERM. */
async function start(): Promise<{ events: Record<string, unknown>[]; exitCode: number | null }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['scripts/start.mjs'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      NODE_ENV: 'test',
      AUTH_SECRET: TEST_SECRET,
      DATABASE_URL: 'pglite://memory',
      PORT: String(port),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events: Record<string, unknown>[] = [];
  eachLine(child, (line) => {
    try {
      events.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // not a log line
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`npm start exited: ${JSON.stringify(events.slice(-3))}`);
    if (Date.now() > deadline) throw new Error('npm start did not answer within 60 s');
    const ok = await fetch(`http://127.0.0.1:${port}/api/health`).then(
      (res) => res.status === 200,
      () => false,
    );
    if (ok) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGTERM');
  return { events, exitCode: await exited };
}

describe('npm start runs the compiled server', () => {
  it('builds dist/node when it is older than the sources, serves from it, and stops cleanly; then runs it as is', async () => {
    // Stale: a build older than every source, or none at all (a fresh clone).
    if (existsSync(OUTFILE)) utimesSync(OUTFILE, new Date(0), new Date(0));
    const stale = await start();
    const names = stale.events.map((event) => event.event);
    expect(names.slice(0, 2)).toEqual(['build.start', 'build.done']);
    expect(stale.events[0]?.reason).toMatch(/changed since the last build|no build yet/);
    expect(names).toContain('server.listening');
    expect(names).toContain('server.stopped');
    expect(stale.exitCode).toBe(0);
    expect(statSync(OUTFILE).mtimeMs).toBeGreaterThan(Date.now() - 120_000);

    const current = await start();
    expect(current.events.map((event) => event.event)).not.toContain('build.start');
    expect(current.events.map((event) => event.event)).toContain('server.listening');
    expect(current.exitCode).toBe(0);
  }, 180_000);
});
