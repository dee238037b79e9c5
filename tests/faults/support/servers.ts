/**
 * Throwaway PostgreSQL and Redis servers that the fault tests may stop,
 * freeze and restart at will. Never the CI servers of `.ci/services.sh`
 * (other suites use those at the same time): the same recipe (initdb as the
 * `postgres` user when root, trust on the socket, scram on loopback, the
 * owner and runtime roles), on free loopback ports, in a temp folder that
 * `stop()` removes.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chown, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const isRoot = process.getuid?.() === 0;

import { freePort } from '../../support/process.js';

export { freePort };

async function postgresBinDir(): Promise<string> {
  const versions = (await readdir('/usr/lib/postgresql').catch(() => [] as string[])).sort(
    (a, b) => Number(b) - Number(a),
  );
  for (const version of versions) {
    const dir = `/usr/lib/postgresql/${version}/bin`;
    try {
      await run(`${dir}/pg_ctl`, ['--version']);
      return dir;
    } catch {
      // next
    }
  }
  throw new Error(
    'PostgreSQL binaries not found in /usr/lib/postgresql/*/bin (source .ci/services.sh && services_install)',
  );
}

/** Runs a PostgreSQL binary as the `postgres` OS user when we are root (initdb and postgres refuse root). */
function asPostgres(
  bin: string,
  args: string[],
  options: { input?: string } = {},
): Promise<{ stdout: string; stderr: string }> {
  const [command, argv] = isRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  return new Promise((resolve, reject) => {
    const child = execFile(command, argv, { timeout: 120_000 }, (error, stdout, stderr) => {
      if (error) reject(Object.assign(error, { stdout, stderr }));
      else resolve({ stdout, stderr });
    });
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

export interface PostgresServer {
  port: number;
  /** The schema owner (migrations, and the checks of the tests). */
  ownerUrl: string;
  /** The runtime role (a member of gatehouse_app: neither superuser nor owner, so RLS binds it). */
  appUrl: string;
  /** A superuser over the socket (postgres.js options): sees every row whatever RLS says. */
  superuser: { host: string; port: number; user: string; database: string };
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** Sends SIGSTOP (true) or SIGCONT (false) to every server process: a server that accepts and never answers. */
  freeze(frozen: boolean): Promise<void>;
  destroy(): Promise<void>;
}

const SETUP_SQL = `
SET client_min_messages = warning;
CREATE ROLE gatehouse_owner LOGIN CREATEROLE CREATEDB PASSWORD 'owner';
CREATE ROLE gatehouse_runtime LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD 'runtime';
CREATE ROLE gatehouse_app NOLOGIN;
GRANT gatehouse_app TO gatehouse_runtime;
CREATE DATABASE gatehouse OWNER gatehouse_owner;
`;

export async function startPostgres(): Promise<PostgresServer> {
  const bin = await postgresBinDir();
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-faults-pg-'));
  const data = join(dir, 'pgdata');
  const socket = dir;
  if (isRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  await asPostgres(`${bin}/initdb`, [
    '-D',
    data,
    '-U',
    'postgres',
    '--auth=trust',
    '--encoding=UTF8',
    '--locale=C.UTF-8',
  ]);
  await asPostgres('/bin/sh', ['-c', `cat > '${data}/pg_hba.conf'`], {
    input: 'local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n',
  });
  const port = await freePort();
  // Killing the server (stop -m immediate) must not lose what it acknowledged:
  // synchronous_commit stays on (fsync can go, the OS outlives the server).
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${socket} -c fsync=off -c full_page_writes=off -c max_connections=100`;
  const start = async () => {
    await asPostgres(`${bin}/pg_ctl`, [
      '-D',
      data,
      '-l',
      join(dir, 'postgres.log'),
      '-w',
      '-t',
      '60',
      '-o',
      options,
      'start',
    ]);
  };
  await start();
  await asPostgres(
    `${bin}/psql`,
    ['-h', socket, '-p', String(port), '-U', 'postgres', '-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-q'],
    { input: SETUP_SQL },
  );
  await asPostgres(`${bin}/psql`, [
    '-h',
    socket,
    '-p',
    String(port),
    '-U',
    'postgres',
    '-d',
    'gatehouse',
    '-v',
    'ON_ERROR_STOP=1',
    '-q',
    '-c',
    'REVOKE CREATE ON SCHEMA public FROM PUBLIC',
  ]);

  /** The postmaster and its children (backends, checkpointer, …). */
  const pids = async (): Promise<number[]> => {
    const postmaster = await readFile(join(data, 'postmaster.pid'), 'utf8').catch(() => '');
    const main = Number(postmaster.split('\n')[0]);
    if (!main) return [];
    const { stdout } = await run('pgrep', ['-P', String(main)]).catch(() => ({ stdout: '' }));
    return [main, ...stdout.split('\n').filter(Boolean).map(Number)];
  };

  const freeze = async (frozen: boolean) => {
    for (const pid of await pids()) {
      try {
        process.kill(pid, frozen ? 'SIGSTOP' : 'SIGCONT');
      } catch {
        // gone already
      }
    }
  };

  return {
    port,
    ownerUrl: `postgres://gatehouse_owner:owner@127.0.0.1:${port}/gatehouse`,
    appUrl: `postgres://gatehouse_runtime:runtime@127.0.0.1:${port}/gatehouse`,
    superuser: { host: socket, port, user: 'postgres', database: 'gatehouse' },
    async stop(mode = 'fast') {
      await asPostgres(`${bin}/pg_ctl`, ['-D', data, '-m', mode, '-w', '-t', '30', 'stop']);
    },
    start,
    freeze,
    async destroy() {
      await freeze(false);
      await asPostgres(`${bin}/pg_ctl`, ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop']).catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface RedisServer {
  port: number;
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** SIGSTOP / SIGCONT: a store that accepts connections and never answers. */
  freeze(frozen: boolean): void;
  destroy(): Promise<void>;
}

function redisAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(false);
    }, 500);
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
    socket.on('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}

export async function startRedis(): Promise<RedisServer> {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-faults-redis-'));
  let child: ChildProcess | null = null;
  const start = async () => {
    child = spawn(
      'redis-server',
      [
        '--bind',
        '127.0.0.1',
        '--port',
        String(port),
        '--protected-mode',
        'yes',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 100; i += 1) {
      if (await redisAnswers(port)) return;
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error('redis-server did not answer within 10 s');
  };
  const stop = async () => {
    const current = child;
    child = null;
    if (!current || current.exitCode !== null) return;
    current.kill('SIGCONT');
    await new Promise<void>((resolve) => {
      current.once('exit', () => resolve());
      current.kill('SIGKILL');
    });
  };
  await start();
  await writeFile(join(dir, 'port'), String(port));
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop,
    start,
    freeze(frozen) {
      child?.kill(frozen ? 'SIGSTOP' : 'SIGCONT');
    },
    async destroy() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
