import { type Filter, parse } from 'scim2-parse-filter';
import { badRequest, ScimError } from './errors.js';

/**
 * SCIM list filters (RFC 7644 section 3.4.2.2), parsed by scim2-parse-filter
 * and then validated into a small AST of our own over a per-resource map of
 * the attributes the service can filter on. The database layer builds its
 * query from this AST (a node's `attribute.column`); matchesScimFilter
 * (filter-match.ts) evaluates the same AST on a JSON resource.
 */

export type ScimFilterAttributeType = 'string' | 'boolean' | 'dateTime';

export interface ScimFilterAttribute {
  type: ScimFilterAttributeType;
  /** RFC 7643 section 2.2: false compares strings case-insensitively. */
  caseExact: boolean;
  /** An opaque key the database layer maps to a column. */
  column: string;
}

/** Lower-cased attribute path (`username`, `emails.value`, `meta.lastmodified`) -> its entry. */
export type ScimAttributeMap = Readonly<Record<string, ScimFilterAttribute>>;

export type ScimCompareOp = 'eq' | 'ne' | 'co' | 'sw' | 'ew' | 'gt' | 'ge' | 'lt' | 'le';

export type ScimFilter =
  | { op: 'and' | 'or'; left: ScimFilter; right: ScimFilter }
  | { op: 'not'; filter: ScimFilter }
  | {
      op: ScimCompareOp;
      /** The lower-cased path the entry was found under (`emails.value`). */
      path: string;
      attribute: ScimFilterAttribute;
      /** A string, a boolean for boolean attributes, a Date for dateTime ones; null only with eq and ne. */
      value: string | boolean | Date | null;
    }
  | { op: 'pr'; path: string; attribute: ScimFilterAttribute }
  /**
   * `emails[type eq "work" and value co "x"]`: one value of the multi-valued
   * attribute `path` matches `filter`, whose paths are full (`emails.type`).
   */
  | { op: 'valuePath'; path: string; filter: ScimFilter };

/**
 * How a string of an attribute that is not caseExact (RFC 7643 section 2.2)
 * is compared: ASCII letters lower-cased, every other character as it is,
 * the way addresses are (docs/security.md "Account linking"), so that
 * `\u00C9` is not `\u00E9` nor KELVIN SIGN `k`. The SQL filters fold alike.
 */
export function foldCase(value: string): string {
  return value.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

/** The longest filter taken: a directory's filters are a few dozen characters. */
export const MAX_FILTER_LENGTH = 1024;

/**
 * C0, DEL and C1: none belongs in a filter. The parser reads some as spaces,
 * and its string pattern backtracks exponentially on newlines in an
 * unterminated string (30 of them hold a core for seconds).
 */
const CONTROL = /\p{Cc}/u;
/** The core schemas' URNs, which may prefix an attribute (RFC 7644 section 3.10). */
const CORE_URN = /^urn:ietf:params:scim:schemas:core:2\.0:(?:user|group):/i;
const STRING_ONLY = new Set(['co', 'sw', 'ew']);
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})?$/i;

const invalid = (detail: string) => badRequest('invalidFilter', detail);

/**
 * Checks what the parser gets wrong rather than letting it answer wrongly: a
 * quoted string's escapes other than \" (it reads "a\\b" as two backslashes)
 * and a sub-attribute after a value filter (`emails[...].value eq`, a PATCH
 * path form it turns into an unrelated `and`).
 */
function guard(input: string): void {
  if (input.length > MAX_FILTER_LENGTH) throw invalid(`A filter is at most ${MAX_FILTER_LENGTH} characters`);
  if (CONTROL.test(input)) throw invalid('A filter holds no control characters');
  let quoted = false;
  for (let i = 0; i < input.length; i++) {
    const char = input[i];
    if (quoted && char === '\\') {
      if (input[i + 1] !== '"') throw invalid('A filter string may escape only a double quote');
      i++;
    } else if (char === '"') quoted = !quoted;
    else if (!quoted && char === ']' && input[i + 1] === '.')
      throw invalid('A sub-attribute after a value filter belongs in a PATCH path, not in a filter');
  }
}

interface Scope {
  attributes: ScimAttributeMap;
  /** `emails.` inside `emails[...]`, else empty. */
  prefix: string;
}

function resolve(attrPath: string, scope: Scope): { path: string; attribute: ScimFilterAttribute } {
  const name = attrPath.replace(CORE_URN, '').toLowerCase();
  const path = scope.prefix + name;
  const attribute = scope.attributes[path];
  if (attribute) return { path, attribute };
  // A multi-valued attribute named alone means its `value` (RFC 7643 section 2.4).
  const value = scope.attributes[`${path}.value`];
  if (value) return { path: `${path}.value`, attribute: value };
  throw invalid(`Unknown attribute "${attrPath}" in filter`);
}

function parseDateTime(value: string, path: string): Date {
  const match = DATE_TIME.exec(value);
  const date = new Date(match && !/[zZ]$|[+-]\d{2}:\d{2}$/.test(value) ? `${value}Z` : value);
  // Date rolls 2021-02-30 over to March: the day must survive the parse.
  const [, year, month, day] = match ?? [];
  const sameDay =
    match && !/[+-]\d{2}:\d{2}$/.test(value)
      ? date.getUTCFullYear() === Number(year) &&
        date.getUTCMonth() + 1 === Number(month) &&
        date.getUTCDate() === Number(day)
      : true;
  // Years 1 to 9999 once in UTC: the database has no year 0, and what toISOString writes past 9999 it cannot read.
  const utcYear = date.getUTCFullYear();
  if (!match || Number.isNaN(date.getTime()) || !sameDay || utcYear < 1 || utcYear > 9999)
    throw invalid(`${path} takes an ISO 8601 date and time, such as "2026-01-31T12:00:00Z"`);
  return date;
}

function compare(op: ScimCompareOp, attrPath: string, compValue: unknown, scope: Scope): ScimFilter {
  const { path, attribute } = resolve(attrPath, scope);
  const misuse = (what: string) => invalid(`${op} does not apply to ${path} (${what})`);
  if (compValue === null) {
    if (op !== 'eq' && op !== 'ne') throw misuse('null is compared with eq or ne only');
    return { op, path, attribute, value: null };
  }
  if (typeof compValue === 'number') throw invalid(`${path} is not a number`);
  switch (attribute.type) {
    case 'boolean':
      if (op !== 'eq' && op !== 'ne') throw misuse('a boolean');
      if (typeof compValue !== 'boolean') throw invalid(`${path} is compared with true or false, unquoted`);
      return { op, path, attribute, value: compValue };
    case 'dateTime':
      if (STRING_ONLY.has(op)) throw misuse('a date and time');
      if (typeof compValue !== 'string') throw invalid(`${path} is compared with a quoted date and time`);
      return { op, path, attribute, value: parseDateTime(compValue, path) };
    case 'string':
      if (typeof compValue !== 'string') throw invalid(`${path} is compared with a quoted string`);
      return { op, path, attribute, value: compValue };
  }
}

function convert(node: Filter, scope: Scope): ScimFilter {
  switch (node.op) {
    case 'and':
    case 'or': {
      const [first, ...rest] = node.filters.map((child) => convert(child, scope));
      if (!first) throw invalid(`${node.op} needs two operands`);
      return rest.reduce((left, right) => ({ op: node.op, left, right }), first);
    }
    case 'not':
      return { op: 'not', filter: convert(node.filter, scope) };
    case '[]': {
      if (scope.prefix) throw invalid('A value filter cannot hold another value filter');
      const path = node.attrPath.replace(CORE_URN, '').toLowerCase();
      const prefix = `${path}.`;
      if (!Object.keys(scope.attributes).some((key) => key.startsWith(prefix)))
        throw invalid(`Unknown attribute "${node.attrPath}" in filter`);
      return { op: 'valuePath', path, filter: convert(node.valFilter, { ...scope, prefix }) };
    }
    case 'pr':
      return { op: 'pr', ...resolve(node.attrPath, scope) };
    default:
      return compare(node.op, node.attrPath, node.compValue, scope);
  }
}

/**
 * Parses and validates a `filter` query parameter (or the filter inside a
 * PATCH path, against the sub-attributes of its attribute). Every refusal is
 * a ScimError 400 invalidFilter naming what is wrong.
 */
export function parseScimFilter(input: string, attributes: ScimAttributeMap): ScimFilter {
  guard(input);
  let ast: Filter;
  try {
    ast = parse(input);
  } catch (error) {
    throw invalid(`Invalid filter: ${error instanceof Error ? error.message : 'unreadable'}`);
  }
  try {
    return convert(ast, { attributes, prefix: '' });
  } catch (error) {
    if (error instanceof ScimError) throw error;
    throw invalid('Invalid filter');
  }
}
