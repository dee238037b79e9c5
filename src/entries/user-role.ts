/**
 * `npm run user:role -- <email> <superadmin|admin|user>` (docs/api.md
 * "Platform roles"): the one way to make the first superadmin. Runs as the schema
 * owner, changes users.role and writes the `user.role_changed` audit entry
 * in one transaction, prints one JSON log line.
 *
 * Exit codes: 0 done (or nothing to change), 1 refused (usage, unknown email,
 * bad configuration, an embedded database in use by a running server) or failed.
 */
import { canonicalEmail } from '../auth/email-address.js';
import type { DatabaseHandle } from '../db/client.js';
import { DatabaseInUseError } from '../db/open.js';
import { setPlatformRoleByEmail } from '../db/queries/user-role-cli.js';
import { ConfigError, parseConfig } from '../shared/config.js';
import { describeError } from '../shared/errors.js';
import { createLogger, type Logger } from '../shared/logger.js';
import { PLATFORM_ROLES, type PlatformRole } from '../shared/permissions.js';
import { openConfiguredDatabase } from './deps.js';

const USAGE = `usage: npm run user:role -- <email> <${PLATFORM_ROLES.join('|')}>`;

/** A refusal with a message for the operator (exit 1, no stack). */
class UserRoleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UserRoleError';
  }
}

interface RoleChange {
  userId: string;
  email: string;
  previousRole: PlatformRole;
  role: PlatformRole;
  changed: boolean;
}

function isPlatformRole(value: string): value is PlatformRole {
  return (PLATFORM_ROLES as readonly string[]).includes(value);
}

function parseArgs(argv: readonly string[]): { email: string; role: PlatformRole } {
  const [email, role, ...rest] = argv;
  if (!email || !role || rest.length > 0) throw new UserRoleError(USAGE);
  if (!isPlatformRole(role))
    throw new UserRoleError(`Unknown role "${role}": must be one of ${PLATFORM_ROLES.join(', ')}`);
  if (!email.includes('@')) throw new UserRoleError(`"${email}" is not an email address. ${USAGE}`);
  return { email: canonicalEmail(email), role };
}

/** Sets the platform role of the user with this (case-insensitive) email, audited, as the schema owner. */
async function changeUserRole(database: DatabaseHandle, email: string, role: PlatformRole): Promise<RoleChange> {
  const wanted = canonicalEmail(email);
  const result = await database.withOwner((owner) => setPlatformRoleByEmail(owner, wanted, role));
  if (result.outcome === 'no_user') throw new UserRoleError(`No user with email ${wanted}`);
  if (result.outcome === 'ambiguous')
    throw new UserRoleError(`More than one user matches ${wanted} (differing only in case); fix the data first`);
  const { outcome: _, ...change } = result;
  return change;
}

async function main(
  argv: readonly string[],
  env: Record<string, unknown>,
  logger: Logger = createLogger(),
): Promise<number> {
  let args: { email: string; role: PlatformRole };
  let database: DatabaseHandle;
  try {
    args = parseArgs(argv);
    database = await openConfiguredDatabase(parseConfig(env).config);
  } catch (error) {
    // An embedded database a running server holds: a change made here would be
    // lost (PGlite has no cross-process locking; src/db/open.ts holds a lock file).
    if (error instanceof UserRoleError || error instanceof DatabaseInUseError)
      logger.error('user_role.refused', { message: error.message });
    else if (error instanceof ConfigError) logger.error('config.invalid', { problems: error.problems });
    else logger.error('user_role.failed', { error: describeError(error) });
    return 1;
  }
  try {
    const result = await changeUserRole(database, args.email, args.role);
    logger.info(result.changed ? 'user.role_changed' : 'user.role_unchanged', { ...result, via: 'cli' });
    return 0;
  } catch (error) {
    if (error instanceof UserRoleError) logger.error('user_role.refused', { message: error.message });
    else logger.error('user_role.failed', { error: describeError(error) });
    return 1;
  } finally {
    await database.close();
  }
}

main(process.argv.slice(2), process.env).then(
  (code) => process.exit(code),
  (error: unknown) => {
    createLogger().error('user_role.failed', { error: describeError(error) });
    process.exit(1);
  },
);
