import { hasControlCharacters, NAME_MAX, oneLine } from '../shared/text.js';
import { ScimError } from './errors.js';

/**
 * What a directory sends for a User (RFC 7643 section 4.1), read into the
 * fields the service stores: the address (userName, else the primary or
 * work email), the name (displayName, else name.formatted, else given and
 * family names, else the address's local part), externalId and active. The
 * booleans Entra ID sends as strings ("True", "False") count. Attributes a
 * directory maps by default that the service does not keep (title, phone
 * numbers, addresses, the enterprise extension) are ignored, not refused.
 */

export interface UserFieldsInput {
  userName?: string;
  name?: string;
  externalId?: string | null;
  active?: boolean;
}

const invalid = (detail: string) => new ScimError(400, 'invalidValue', detail);
const CORE = /^urn:ietf:params:scim:schemas:core:2\.0:user:/i;
const EXTENSION = /^urn:ietf:params:scim:schemas:extension:/i;
const IGNORED = new Set([
  'title',
  'nickname',
  'profileurl',
  'usertype',
  'preferredlanguage',
  'locale',
  'timezone',
  'phonenumbers',
  'addresses',
  'ims',
  'photos',
  'entitlements',
  'roles',
  'x509certificates',
  'password',
  'name.middlename',
  'name.honorificprefix',
  'name.honorificsuffix',
]);
const READ_ONLY = new Set(['id', 'meta', 'groups']);

function bool(value: unknown, path: string): boolean {
  if (typeof value === 'boolean') return value;
  if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
  throw invalid(`${path} must be true or false`);
}

function str(value: unknown, path: string, max = 256): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > max)
    throw invalid(`${path} must be a string of 1 to ${max} characters`);
  return value;
}

/** An identifier (userName, externalId): refused with control characters, where a name has them made spaces. */
function identifier(value: unknown, path: string, max = 256): string {
  const checked = str(value, path, max);
  if (hasControlCharacters(checked)) throw invalid(`${path} must not contain control characters`);
  return checked;
}

/** The address of an `emails` value: the primary one, else the work one, else the first. */
function emailOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw invalid('emails must be a list');
  const list = value.filter(
    (e): e is { value: string; primary?: unknown; type?: unknown } => typeof e?.value === 'string',
  );
  return (
    list.find((e) => e.primary === true || e.primary === 'True') ??
    list.find((e) => e.type === 'work') ??
    list[0]
  )?.value;
}

/** Name parts as sent, to be settled into one name. */
interface NameParts {
  /** The address `emails` gives: the userName of a POST or PUT that has none; else ignored (it is the userName's). */
  email?: string;
  displayName?: string;
  formatted?: string;
  givenName?: string;
  familyName?: string;
}

function settleName(parts: NameParts, current?: string): string | undefined {
  const [given = '', ...rest] = (current ?? '').split(' ');
  const joined =
    parts.givenName !== undefined || parts.familyName !== undefined
      ? `${parts.givenName ?? given} ${parts.familyName ?? rest.join(' ')}`
      : undefined;
  const chosen = [parts.displayName, parts.formatted, joined].map((n) => oneLine(n ?? '').trim()).find(Boolean);
  return chosen?.slice(0, NAME_MAX);
}

/** Reads one attribute of a POST or PUT body (a lower-cased path without the core URN) into the parts read so far. */
function take(path: string, value: unknown, out: UserFieldsInput, name: NameParts) {
  if (
    EXTENSION.test(path) ||
    IGNORED.has(path) ||
    /^(phonenumbers|addresses|ims|photos|entitlements|roles)\[/.test(path)
  )
    return;
  if (path === 'schemas') return;
  if (READ_ONLY.has(path)) throw new ScimError(400, 'mutability', `${path} is read-only`);
  if (path === 'active') out.active = bool(value, 'active');
  else if (path === 'externalid') out.externalId = value === null ? null : identifier(value, 'externalId');
  else if (path === 'username') out.userName = identifier(value, 'userName', 254);
  else if (path === 'displayname') name.displayName = str(value, 'displayName');
  else if (path === 'name') {
    if (!value || typeof value !== 'object') return;
    for (const [key, inner] of Object.entries(value)) take(`name.${key.toLowerCase()}`, inner, out, name);
  } else if (path === 'name.formatted') name.formatted = str(value, 'name.formatted');
  else if (path === 'name.givenname') name.givenName = str(value, 'name.givenName');
  else if (path === 'name.familyname') name.familyName = str(value, 'name.familyName');
  else if (path === 'emails' || /^emails\[[^\]]*\](\.value)?$/.test(path) || path === 'emails.value') {
    const address = emailOf(Array.isArray(value) || typeof value === 'string' ? value : [value]);
    if (address !== undefined) name.email ??= identifier(address, 'emails.value', 254);
  } else throw new ScimError(400, 'invalidPath', `Unknown attribute: ${path}`);
}

function attributes(value: unknown, out: UserFieldsInput, name: NameParts) {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw invalid('value must be an object');
  for (const [key, inner] of Object.entries(value)) take(key.replace(CORE, '').toLowerCase(), inner, out, name);
}

/** A POST or PUT body: every field, defaults for the absent ones (active true, no externalId). */
export function userFromBody(body: unknown): Required<UserFieldsInput> & { userName: string } {
  const out: UserFieldsInput = {};
  const name: NameParts = {};
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw invalid('The body must be a User');
  // What the service answered (id, meta, groups) comes back in a directory's PUT: not a change.
  const { userName, emails, id: _id, meta: _meta, groups: _groups, ...rest } = body as Record<string, unknown>;
  attributes(rest, out, name);
  if (userName !== undefined) take('username', userName, out, name);
  if (emails !== undefined) take('emails', emails, out, name);
  out.userName ??= name.email;
  if (!out.userName) throw invalid('userName is required');
  const local = out.userName.slice(0, Math.max(0, out.userName.lastIndexOf('@')));
  return {
    userName: out.userName,
    name: settleName(name) ?? (local || out.userName).slice(0, NAME_MAX),
    externalId: out.externalId ?? null,
    active: out.active ?? true,
  };
}

/**
 * What a PATCH changed (RFC 7644 section 3.5.2, applied by src/scim/patch.ts
 * to the User as the service answers it): only the fields whose value moved.
 * The name follows the part that moved: displayName, else name.formatted,
 * else the given and family names over the current name.
 */
export function userChanges(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  currentName: string,
): UserFieldsInput {
  const out: UserFieldsInput = {};
  if (after.active !== before.active) out.active = after.active === undefined ? false : bool(after.active, 'active');
  if (after.externalId !== before.externalId)
    out.externalId =
      after.externalId === undefined || after.externalId === null ? null : identifier(after.externalId, 'externalId');
  if (after.userName !== before.userName) out.userName = identifier(after.userName, 'userName', 254);
  const was = (before.name ?? {}) as Record<string, unknown>;
  const now = (after.name ?? {}) as Record<string, unknown>;
  const moved = (value: unknown, previous: unknown) => (value !== previous ? value : undefined);
  const text = (value: unknown, path: string) => (value === undefined || value === null ? '' : str(value, path));
  const parts: NameParts = {};
  const displayName = moved(after.displayName, before.displayName);
  if (displayName !== undefined || (after.displayName === undefined && before.displayName !== undefined))
    parts.displayName = text(displayName, 'displayName');
  const formatted = moved(now.formatted, was.formatted);
  if (formatted !== undefined) parts.formatted = text(formatted, 'name.formatted');
  if (moved(now.givenName, was.givenName) !== undefined) parts.givenName = text(now.givenName, 'name.givenName');
  if (moved(now.familyName, was.familyName) !== undefined) parts.familyName = text(now.familyName, 'name.familyName');
  const settled = Object.keys(parts).length > 0 ? settleName(parts, currentName) : undefined;
  return { ...out, ...(settled !== undefined ? { name: settled } : {}) };
}
