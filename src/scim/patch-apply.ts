import { badRequest } from './errors.js';
import { foldCase, type ScimFilter } from './filter.js';
import { matchesScimFilter } from './filter-match.js';
import type { ScimPatchAttribute, ScimPatchOperation } from './patch-schema.js';

/**
 * RFC 7644 section 3.5.2 on a resource's JSON: each operation in order, all
 * or nothing (the input is never changed; the first refusal throws). The
 * route compares the result with what it stored and persists the difference.
 */

export type ScimResource = Record<string, unknown>;
type Value = Record<string, unknown>;

const isObject = (value: unknown): value is Value =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b))
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a).filter((key) => a[key] !== undefined);
  return (
    keys.length === Object.keys(b).filter((key) => b[key] !== undefined).length &&
    keys.every((key) => deepEqual(a[key], b[key]))
  );
}

/** The resource's own key for an attribute (names are case-insensitive), else its canonical name. */
const keyOf = (target: Value, name: string) =>
  Object.keys(target).find((key) => key.toLowerCase() === name.toLowerCase()) ?? name;
const read = (target: Value, name: string): unknown => target[keyOf(target, name)];
function write(target: Value, name: string, value: unknown): void {
  delete target[keyOf(target, name)];
  if (value !== null && value !== undefined && !(Array.isArray(value) && value.length === 0)) target[name] = value;
}

/** Sets (or, for null, removes) sub-attributes of a complex value. */
function merge(target: Value, changes: Value): Value {
  const result = { ...target };
  for (const [name, value] of Object.entries(changes)) write(result, name, value);
  return result;
}

const withoutNulls = (value: Value): Value => merge({}, value);

/** The identity of one value of a multi-valued attribute: its `value` sub-attribute. */
function identity(attribute: ScimPatchAttribute, item: unknown): unknown {
  if (!isObject(item)) return item;
  const value = read(item, 'value');
  const caseExact = attribute.subAttributes?.find((sub) => sub.name === 'value')?.caseExact ?? false;
  return typeof value === 'string' && !caseExact ? foldCase(value) : value;
}

/** RFC 7644 section 3.5.2: one value set primary makes every other one not primary. */
function onePrimary(items: unknown[], touched: Set<unknown>): unknown[] {
  const chosen = [...touched].filter((item) => isObject(item) && item.primary === true).pop();
  if (!chosen) return items;
  return items.map((item) =>
    item !== chosen && isObject(item) && item.primary === true ? { ...item, primary: false } : item,
  );
}

/** The sub-attribute values an `eq`/`and` filter names: what a value created by `add` on `attr[filter]` holds. */
function equalities(filter: ScimFilter): Value | undefined {
  if (filter.op === 'eq' && (typeof filter.value === 'string' || typeof filter.value === 'boolean'))
    return { [filter.attribute.column]: filter.value };
  if (filter.op !== 'and') return undefined;
  const left = equalities(filter.left);
  const right = equalities(filter.right);
  return left && right ? { ...left, ...right } : undefined;
}

function applyMultiValued(resource: Value, { op, path, value }: ScimPatchOperation): void {
  const { attribute, filter, subAttribute } = path;
  const current = read(resource, attribute.name);
  let items: unknown[] = Array.isArray(current) ? [...current] : current == null ? [] : [current];
  const touched = new Set<unknown>();
  const change = (item: unknown): unknown => {
    const next = subAttribute
      ? merge(isObject(item) ? item : {}, { [subAttribute.name]: value })
      : merge(isObject(item) ? item : {}, value as Value);
    touched.add(next);
    return next;
  };
  if (filter || subAttribute) {
    const selected = (item: unknown) => !filter || matchesScimFilter(filter, item);
    const matched = items.some(selected);
    if (op === 'remove') {
      items = subAttribute
        ? items.map((item) => (selected(item) && isObject(item) ? merge(item, { [subAttribute.name]: null }) : item))
        : items.filter((item) => !selected(item));
    } else if (matched) {
      items = items.map((item) => (selected(item) ? change(item) : item));
    } else if (op === 'replace' && filter) {
      throw badRequest('noTarget', `No value of ${attribute.name} matches "${path.text}"`);
    } else {
      // add on attr[filter](.sub) with no match, or attr.sub on no value: a new value (what Entra ID means).
      const seed = filter ? equalities(filter) : {};
      if (!seed) throw badRequest('noTarget', `No value of ${attribute.name} matches "${path.text}"`);
      items.push(change(seed));
    }
  } else if (op === 'remove') {
    // Entra ID removes members with a list of values instead of a filter.
    const gone = Array.isArray(value) ? new Set(value.map((item) => identity(attribute, item))) : undefined;
    items = gone ? items.filter((item) => !gone.has(identity(attribute, item))) : [];
  } else {
    if (op === 'replace') items = [];
    const index = new Map(items.map((item, i) => [identity(attribute, item), i]));
    for (const item of (value as unknown[] | null) ?? []) {
      const added = isObject(item) ? withoutNulls(item) : item;
      const key = identity(attribute, added);
      const at = key === undefined ? undefined : index.get(key);
      // A value already there is merged, not repeated.
      const next = at === undefined ? added : isObject(added) ? merge(items[at] as Value, added) : added;
      if (at === undefined) index.set(key, items.push(next) - 1);
      else items[at] = next;
      touched.add(next);
    }
  }
  write(resource, attribute.name, onePrimary(items, touched));
}

function applySingle(resource: Value, { op, path, value }: ScimPatchOperation): void {
  const { attribute, subAttribute } = path;
  if (op === 'remove' && !subAttribute) {
    write(resource, attribute.name, null);
    return;
  }
  if (attribute.type !== 'complex') {
    write(resource, attribute.name, value);
    return;
  }
  const current = read(resource, attribute.name);
  const changes = subAttribute ? { [subAttribute.name]: op === 'remove' ? null : value } : (value as Value | null);
  const next = changes === null ? {} : merge(isObject(current) ? current : {}, changes);
  write(resource, attribute.name, Object.keys(next).length === 0 ? null : next);
}

function check(resource: Value, operation: ScimPatchOperation): boolean {
  const { op, path, value } = operation;
  const { attribute, subAttribute } = path;
  if (attribute.readOnly || subAttribute?.readOnly) {
    const current = read(resource, attribute.name);
    const target = subAttribute && isObject(current) ? read(current, subAttribute.name) : current;
    // Okta sends the id back in a Group's replace: the same value is no change.
    if (op !== 'remove' && !path.filter && deepEqual(target ?? null, value)) return false;
    throw badRequest('mutability', `${path.text} is read-only`);
  }
  const empty = value === null || value === '' || (Array.isArray(value) && value.length === 0);
  if (attribute.required && !subAttribute && (op === 'remove' || empty))
    throw badRequest('invalidValue', `${attribute.name} is required`);
  return true;
}

/**
 * The most values of multi-valued attributes one request may visit: each
 * operation on one visits every value it holds and every value it sends
 * (a value filter is evaluated on each). A thousand filtered removals on a
 * group of 10,000 members held a core for seconds, every organization's
 * requests waiting; this bound keeps a request to tens of milliseconds.
 */
export const MAX_PATCH_WORK = 100_000;

function workOf(resource: Value, { path, value }: ScimPatchOperation): number {
  const current = read(resource, path.attribute.name);
  return (Array.isArray(current) ? current.length : 1) + (Array.isArray(value) ? value.length : 1);
}

/**
 * Applies parsed operations to a resource's JSON and returns the new JSON.
 * Refusals are ScimError 400: mutability (a read-only attribute changed),
 * invalidValue (a required one emptied), noTarget (`replace` on a value
 * filter that matches nothing), tooMany (past MAX_PATCH_WORK: the
 * operations fit in several requests). A `remove` whose filter matches
 * nothing changes nothing, so a directory's retry succeeds.
 */
export function applyScimPatch(resource: ScimResource, operations: readonly ScimPatchOperation[]): ScimResource {
  const result = structuredClone(resource);
  let work = 0;
  for (const operation of operations) {
    if (!check(result, operation)) continue;
    if (!operation.path.attribute.multiValued) {
      applySingle(result, operation);
      continue;
    }
    work += workOf(result, operation);
    if (work > MAX_PATCH_WORK)
      throw badRequest('tooMany', 'These operations take too much work for one request: send them in several');
    applyMultiValued(result, operation);
  }
  return result;
}
