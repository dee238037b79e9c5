/**
 * docs/api.md "Platform roles": `npm run user:role -- <email> <role>` makes the
 * first superadmin. The real command, as a subprocess, on a PGlite data
 * directory migrated by the real `db:migrate` command.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCK_FILE, openPglite } from '../../src/db/open.js';
import { TEST_SECRET } from '../support/app.js';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((done) => {
    execFile(command, args, { cwd: ROOT, env, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

/** JSON log lines of a run (both streams), ignoring anything else (npm's own warnings). */
function logLines(result: Run): Record<string, unknown>[] {
  return `${result.stdout}\n${result.stderr}`
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe('user:role command', () => {
  let dir: string;
  let env: Record<string, string>;
  const ids: Record<'first' | 'already' | 'badRole', string> = { first: '', already: '', badRole: '' };

  /** Opens the data directory (exclusively: a PGlite directory cannot be open twice), runs fn as owner, closes it. */
  async function withDatabase<T>(fn: (owner: import('kysely').Kysely<any>) => Promise<T>): Promise<T> {
    const database = await openPglite({ url: `pglite://${dir}` });
    try {
      return await database.withOwner(fn);
    } finally {
      await database.close();
    }
  }

  async function stateOf(userId: string) {
    return withDatabase(async (owner) => {
      const user = await owner.selectFrom('users').select(['role']).where('id', '=', userId).executeTakeFirstOrThrow();
      const audit = await owner
        .selectFrom('audit_logs')
        .select(['tenant_id', 'actor_id', 'action', 'metadata'])
        .where('action', '=', 'user.role_changed')
        .where(sql`metadata->>'userId'`, '=', userId)
        .orderBy('created_at')
        .execute();
      return { role: user.role as string, audit };
    });
  }

  const cli = (...args: string[]) => run(TSX, ['src/entries/user-role.ts', ...args], env);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'gatehouse-cli-'));
    env = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? tmpdir(),
      NODE_ENV: 'development',
      AUTH_SECRET: TEST_SECRET,
      DATABASE_URL: `pglite://${dir}`,
    };
    const migrated = await run('npx', ['tsx', 'src/entries/migrate.ts'], env);
    expect(migrated.code, migrated.stderr).toBe(0);
    expect(logLines(migrated).some((line) => line.event === 'db.migrate_done')).toBe(true);
    // "Sign up" the users directly in that database, then close it before any command runs.
    await withDatabase(async (owner) => {
      for (const [key, email, role] of [
        ['first', 'first.admin@example.test', 'user'],
        ['already', 'already@example.test', 'admin'],
        ['badRole', 'bad.role@example.test', 'user'],
      ] as const) {
        const row = await owner
          .insertInto('users')
          .values({ name: 'CLI User', email, role, email_verified: true })
          .returning('id')
          .executeTakeFirstOrThrow();
        ids[key] = row.id as string;
      }
    });
  }, 120_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('npm run user:role -- <email> superadmin: sets the role by case-insensitive email, audits it, logs one JSON line, exits 0', async () => {
    const userId = ids.first;
    const result = await run(
      'npm',
      ['run', '--silent', 'user:role', '--', 'First.Admin@Example.TEST', 'superadmin'],
      env,
    );
    expect(result.code, result.stderr).toBe(0);
    const lines = logLines(result);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'info',
      event: 'user.role_changed',
      userId,
      previousRole: 'user',
      role: 'superadmin',
    });
    expect(
      result.stdout
        .trim()
        .split('\n')
        .filter((line) => line.startsWith('{')),
    ).toHaveLength(1);

    const state = await stateOf(userId);
    expect(state.role).toBe('superadmin');
    expect(state.audit).toEqual([
      {
        tenant_id: null,
        actor_id: null,
        action: 'user.role_changed',
        metadata: { userId, previousRole: 'user', role: 'superadmin', via: 'cli' },
      },
    ]);
  }, 60_000);

  it('the same role again changes nothing and writes no second audit entry (exit 0)', async () => {
    const userId = ids.already;
    const result = await cli('already@example.test', 'admin');
    expect(result.code, result.stderr).toBe(0);
    expect(logLines(result)).toEqual([
      expect.objectContaining({ event: 'user.role_unchanged', role: 'admin', previousRole: 'admin' }),
    ]);
    expect(await stateOf(userId)).toEqual({ role: 'admin', audit: [] });
  }, 60_000);

  it('an unknown email: exit 1 with a clear message, nothing written', async () => {
    const result = await cli('nobody@example.test', 'superadmin');
    expect(result.code).toBe(1);
    const lines = logLines(result);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'error',
        event: 'user_role.refused',
        message: 'No user with email nobody@example.test',
      }),
    ]);
  }, 60_000);

  it('a bad role (owner, or anything not superadmin|admin|user): exit 1, role unchanged', async () => {
    const userId = ids.badRole;
    for (const role of ['owner', 'SUPERADMIN']) {
      const result = await cli('bad.role@example.test', role);
      expect(result.code, role).toBe(1);
      expect(`${result.stdout}${result.stderr}`, role).toMatch(
        /superadmin\|admin\|user|must be one of superadmin, admin, user/,
      );
    }
    expect(await stateOf(userId)).toEqual({ role: 'user', audit: [] });
  }, 60_000);

  it('missing arguments: exit 1 with the usage', async () => {
    const result = await cli();
    expect(result.code).toBe(1);
    expect(logLines(result)).toEqual([
      expect.objectContaining({
        event: 'user_role.refused',
        message: expect.stringContaining('usage: npm run user:role -- <email>'),
      }),
    ]);
  }, 60_000);

  describe('an embedded database held by a running process', () => {
    const lockPath = () => join(dir, LOCK_FILE);
    const exists = (path: string) =>
      stat(path).then(
        () => true,
        () => false,
      );

    it('refuses with a clear message and exit 1 while the directory is open elsewhere; nothing changes, and works once it is closed', async () => {
      const userId = ids.badRole;
      const held = await openPglite({ url: `pglite://${dir}` });
      try {
        expect((await readFile(lockPath(), 'utf8')).trim()).toBe(String(process.pid));
        const result = await cli('bad.role@example.test', 'admin');
        expect(result.code).toBe(1);
        expect(logLines(result)).toEqual([
          expect.objectContaining({
            level: 'error',
            event: 'user_role.refused',
            message: `The embedded database at ${dir} is in use by a running process (pid ${process.pid}), such as the server: stop it first, or run the command against PostgreSQL`,
          }),
        ]);
        // The holder's view: unchanged.
        const role = await held.withOwner((owner) =>
          owner.selectFrom('users').select('role').where('id', '=', userId).executeTakeFirstOrThrow(),
        );
        expect(role.role).toBe('user');
        // The holder's lock survives the refused attempt.
        expect((await readFile(lockPath(), 'utf8')).trim()).toBe(String(process.pid));
      } finally {
        await held.close();
      }
      expect(await exists(lockPath())).toBe(false);
      expect(await stateOf(userId)).toEqual({ role: 'user', audit: [] });

      const after = await cli('bad.role@example.test', 'admin');
      expect(after.code, after.stderr).toBe(0);
      expect((await stateOf(userId)).role).toBe('admin');
      await withDatabase((owner) =>
        owner.updateTable('users').set({ role: 'user' }).where('id', '=', userId).execute(),
      );
      await withDatabase((owner) =>
        owner.deleteFrom('audit_logs').where(sql`metadata->>'userId'`, '=', userId).execute(),
      );
    }, 60_000);

    it('a second open in the same process is refused too', async () => {
      const held = await openPglite({ url: `pglite://${dir}` });
      try {
        await expect(openPglite({ url: `pglite://${dir}` })).rejects.toThrow(/in use by a running process/);
      } finally {
        await held.close();
      }
    }, 60_000);

    it('a stale lock (its process is gone, or empty) is taken over, and removed when the command ends', async () => {
      const dead = await run(process.execPath, ['-e', 'console.log(process.pid)'], env);
      const deadPid = Number(dead.stdout.trim());
      expect(deadPid).toBeGreaterThan(0);
      for (const content of [`${deadPid}\n`, '']) {
        await writeFile(lockPath(), content);
        const result = await cli('already@example.test', 'admin');
        expect(result.code, result.stderr).toBe(0);
        expect(logLines(result)).toEqual([expect.objectContaining({ event: 'user.role_unchanged' })]);
        expect(await exists(lockPath())).toBe(false);
      }
    }, 60_000);
  });

  it('refuses to run on an insecure configuration (production without AUTH_SECRET)', async () => {
    const result = await run(TSX, ['src/entries/user-role.ts', 'first.admin@example.test', 'user'], {
      ...env,
      NODE_ENV: 'production',
      AUTH_SECRET: '',
    });
    expect(result.code).toBe(1);
    expect(logLines(result)).toEqual([expect.objectContaining({ level: 'error', event: 'config.invalid' })]);
  }, 60_000);
});
