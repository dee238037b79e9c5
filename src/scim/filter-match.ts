import { foldCase, type ScimFilter, type ScimFilterAttribute } from './filter.js';

/**
 * Evaluates a validated filter on a JSON resource, the way the database
 * query must (RFC 7644 section 3.4.2.2): attribute names matched
 * case-insensitively; strings compared case-insensitively unless caseExact;
 * a multi-valued attribute matches when one of its values does; `ne` is the
 * negation of `eq` (an absent attribute is "not equal"); `pr` needs a
 * non-empty value; dateTime values compared as instants. PATCH value filters
 * use it on one value of a multi-valued attribute.
 */

type Json = unknown;

function child(node: Json, segment: string): Json[] {
  if (Array.isArray(node)) return node.flatMap((item) => child(item, segment));
  if (typeof node !== 'object' || node === null) return [];
  const key = Object.keys(node).find((name) => name.toLowerCase() === segment);
  return key === undefined ? [] : [(node as Record<string, Json>)[key]];
}

/** The values at a lower-cased dotted path, arrays flattened, null and absent dropped. */
function valuesAt(resource: Json, path: string): Json[] {
  let nodes: Json[] = [resource];
  for (const segment of path.split('.')) nodes = nodes.flatMap((node) => child(node, segment));
  return nodes.flatMap((node) => (Array.isArray(node) ? node : [node])).filter((node) => node != null);
}

const nonEmpty = (value: Json): boolean =>
  value !== '' &&
  !(Array.isArray(value) && value.length === 0) &&
  !(typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 0);

type Comparable = string | number | boolean;

/** The resource's value in the form the filter value is compared in, or undefined when it cannot be. */
function comparable(value: Json, attribute: ScimFilterAttribute): Comparable | undefined {
  switch (attribute.type) {
    case 'boolean':
      return typeof value === 'boolean' ? value : undefined;
    case 'dateTime': {
      const time = typeof value === 'string' || value instanceof Date ? new Date(value).getTime() : Number.NaN;
      return Number.isNaN(time) ? undefined : time;
    }
    case 'string':
      if (typeof value !== 'string') return undefined;
      return attribute.caseExact ? value : foldCase(value);
  }
}

function operand(value: string | boolean | Date, attribute: ScimFilterAttribute): Comparable {
  if (value instanceof Date) return value.getTime();
  if (typeof value === 'string' && !attribute.caseExact) return foldCase(value);
  return value;
}

function test(op: string, actual: Comparable, expected: Comparable): boolean {
  switch (op) {
    case 'eq':
      return actual === expected;
    case 'co':
      return String(actual).includes(String(expected));
    case 'sw':
      return String(actual).startsWith(String(expected));
    case 'ew':
      return String(actual).endsWith(String(expected));
    case 'gt':
      return actual > expected;
    case 'ge':
      return actual >= expected;
    case 'lt':
      return actual < expected;
    case 'le':
      return actual <= expected;
    default:
      return false;
  }
}

function matches(filter: ScimFilter, resource: Json, prefix: string): boolean {
  switch (filter.op) {
    case 'and':
      return matches(filter.left, resource, prefix) && matches(filter.right, resource, prefix);
    case 'or':
      return matches(filter.left, resource, prefix) || matches(filter.right, resource, prefix);
    case 'not':
      return !matches(filter.filter, resource, prefix);
    case 'valuePath': {
      const inner = `${filter.path}.`;
      return valuesAt(resource, filter.path.slice(prefix.length)).some((value) => matches(filter.filter, value, inner));
    }
    case 'pr':
      return valuesAt(resource, filter.path.slice(prefix.length)).some(nonEmpty);
    default: {
      const values = valuesAt(resource, filter.path.slice(prefix.length));
      if (filter.value === null) return (filter.op === 'eq') === (values.length === 0);
      if (filter.op === 'ne') return !matches({ ...filter, op: 'eq' }, resource, prefix);
      const expected = operand(filter.value, filter.attribute);
      return values.some((value) => {
        const actual = comparable(value, filter.attribute);
        return actual !== undefined && test(filter.op, actual, expected);
      });
    }
  }
}

/** Whether a JSON resource (a User, a Group, or one value of a multi-valued attribute) matches the filter. */
export function matchesScimFilter(filter: ScimFilter, resource: unknown): boolean {
  return matches(filter, resource, '');
}
