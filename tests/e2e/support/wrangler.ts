import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../support/process.js';
import { REPO_ROOT } from './servers.js';

export { freePort };

/** 40 random base-62 characters (AUTH_SECRET). */
export function randomSecret(length = 40): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return [...randomBytes(length)].map((byte) => alphabet[byte % alphabet.length]).join('');
}

export interface WranglerDev {
  url: string;
  port: number;
  /** The worker's DevTools inspector (CPU profiles: tests/perf/bench-worker-profile.ts). */
  inspectorPort: number;
  /** wrangler's working folder (its .wrangler/tmp holds the dev bundle and its source map). */
  dir: string;
  /** Everything wrangler and the worker printed so far. */
  log(): string;
  stop(): Promise<void>;
}

/** `.dev.vars` syntax: KEY="value" with the value JSON-quoted (dotenv reads the escapes). */
function devVars(vars: Record<string, string>): string {
  return Object.entries(vars)
    .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
    .join('\n');
}

/**
 * `wrangler dev --local` of the project's own wrangler.toml and src/entries/worker.ts,
 * in workerd, on 127.0.0.1:<port>. The secrets go to a generated `.dev.vars`
 * in a temporary folder beside a copy of wrangler.toml whose `main` and
 * `[alias]` targets point back at the repository (so nothing is written into
 * the work tree and a developer's own `.dev.vars` is neither used nor
 * overwritten); wrangler's state and logs stay in that folder too.
 */
export async function startWranglerDev(options: {
  port: number;
  vars: (port: number) => Record<string, string>;
  readyTimeoutMs?: number;
  /** Extra environment for wrangler (CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE: the Hyperdrive binding's local origin). */
  env?: Record<string, string>;
  /** Another entry than wrangler.toml's `main` (the bench's bare worker), same settings otherwise. */
  main?: string;
  /** The path answered 200 when ready (default /api/health); null: ready once wrangler prints "Ready on" (the worker has not served a request yet). */
  readyPath?: string | null;
}): Promise<WranglerDev> {
  const { port } = options;
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-wrangler-'));
  const toml = await readFile(join(REPO_ROOT, 'wrangler.toml'), 'utf8');
  const mainLine = /^main\s*=\s*"([^"]+)"\s*$/m;
  const main = mainLine.exec(toml)?.[1];
  if (!main) throw new Error('wrangler.toml has no `main = "…"` line');
  // Relative values (the `[alias]` targets) resolve from the copy's folder: point them back too.
  const copy = toml
    .replace(mainLine, `main = ${JSON.stringify(options.main ?? join(REPO_ROOT, main))}`)
    .replace(/=\s*"(\.\.?\/[^"]*)"/g, (_, path: string) => `= ${JSON.stringify(join(REPO_ROOT, path))}`);
  await writeFile(join(dir, 'wrangler.toml'), copy);
  await writeFile(join(dir, '.dev.vars'), devVars(options.vars(port)), { mode: 0o600 });

  const inspectorPort = await freePort();
  const output: string[] = [];
  const child: ChildProcess = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'node_modules/wrangler/bin/wrangler.js'),
      'dev',
      '--config',
      join(dir, 'wrangler.toml'),
      '--local',
      '--ip',
      '127.0.0.1',
      '--port',
      String(port),
      '--inspector-port',
      String(inspectorPort),
      '--show-interactive-dev-session=false',
      // GET /__scheduled?cron=… runs the scheduled handler (the cron triggers of wrangler.toml).
      '--test-scheduled',
      '--log-level',
      'info',
    ],
    {
      cwd: dir,
      // Its own process group: stop() ends wrangler and its workerd, nothing else.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        WRANGLER_SEND_METRICS: 'false',
        WRANGLER_LOG_PATH: join(dir, 'logs'),
        NO_COLOR: '1',
        FORCE_COLOR: '0',
        // wrangler bakes its own NODE_ENV into the bundle as `process.env.NODE_ENV`
        // (libraries read it: better-auth's test mode, say); a deploy bakes
        // `production`, and so must this run, not vitest's `test`.
        NODE_ENV: 'production',
        ...options.env,
      },
    },
  );
  child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
  let exited: number | null | undefined;
  const exit = new Promise<void>((ok) =>
    child.once('exit', (code) => {
      exited = code;
      ok();
    }),
  );

  const url = `http://127.0.0.1:${port}`;
  const log = () => output.join('');
  const stop = async () => {
    if (exited === undefined && child.pid) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        /* already gone */
      }
      const timer = setTimeout(() => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }, 5_000);
      await exit;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };

  // Ready when the worker answers (not merely when wrangler prints "Ready").
  const deadline = Date.now() + (options.readyTimeoutMs ?? 90_000);
  for (;;) {
    if (exited !== undefined) {
      await stop();
      throw new Error(`wrangler dev exited (${exited}) before it was ready:\n${log()}`);
    }
    if (options.readyPath === null) {
      if (/Ready on http/.test(log())) break;
    } else {
      try {
        const res = await fetch(`${url}${options.readyPath ?? '/api/health'}`, { signal: AbortSignal.timeout(5_000) });
        if (res.status === 200) break;
      } catch {
        /* not listening yet */
      }
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(
        `wrangler dev did not answer ${options.readyPath ?? '/api/health'} within the timeout:\n${log()}`,
      );
    }
    await new Promise((ok) => setTimeout(ok, options.readyPath === null ? 20 : 250));
  }
  return { url, port, inspectorPort, dir, log, stop };
}
