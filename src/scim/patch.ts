import { badRequest } from './errors.js';
import {
  findAttribute,
  isIgnoredPath,
  PATCH_SCHEMAS,
  parsePatchPath,
  type ScimPatchAttribute,
  type ScimPatchOp,
  type ScimPatchOperation,
  type ScimPatchPath,
  type ScimPatchSchema,
} from './patch-schema.js';

export { applyScimPatch, MAX_PATCH_WORK, type ScimResource } from './patch-apply.js';
export type { ScimPatchAttribute, ScimPatchOp, ScimPatchOperation, ScimPatchPath, ScimPatchSchema };

/**
 * A PATCH request (RFC 7644 section 3.5.2) read into operations the service
 * can apply, in the spellings Microsoft Entra ID and Okta send: any case of
 * `op` ("Replace"), `Operations` or `operations`, a `value` object without
 * `path` whose keys are paths themselves ("name.givenName",
 * "emails[type eq \"work\"].value", URN-prefixed names), "True"/"False" for
 * booleans. A path-less operation becomes one operation per key; one on an
 * attribute the service ignores (patch-schema.ts IGNORED) none. Values are
 * checked against their attribute's type here; mutability, targets and
 * filters are checked by applyScimPatch against the resource.
 */

export const PATCH_OP_URN = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
/** The most operations one request may hold. */
export const MAX_PATCH_OPERATIONS = 1000;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const invalidValue = (path: string, expected: string) => badRequest('invalidValue', `${path} takes ${expected}`);

function simple(attribute: ScimPatchAttribute, value: unknown, where: string): unknown {
  if (value === null) return null;
  if (attribute.type === 'boolean') {
    if (typeof value === 'boolean') return value;
    // Entra ID sends "True" and "False".
    if (typeof value === 'string' && /^(true|false)$/i.test(value)) return value.toLowerCase() === 'true';
    throw invalidValue(where, 'true or false');
  }
  if (typeof value !== 'string') throw invalidValue(where, 'a string');
  return value;
}

/** A complex value: known sub-attributes only, canonically named; null kept (it unassigns). */
function complex(attribute: ScimPatchAttribute, value: unknown, where: string): Record<string, unknown> {
  if (!isObject(value)) throw invalidValue(where, 'an object');
  const result: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    const sub = findAttribute(attribute.subAttributes, key);
    if (!sub) throw badRequest('invalidPath', `${attribute.name} has no sub-attribute "${key}"`);
    result[sub.name] = simple(sub, inner, `${attribute.name}.${sub.name}`);
  }
  return result;
}

/** The value an operation on `path` carries, checked against what the path names. */
function normalize(path: ScimPatchPath, value: unknown): unknown {
  const { attribute, subAttribute, filter } = path;
  if (subAttribute) return simple(subAttribute, value, `${attribute.name}.${subAttribute.name}`);
  if (!attribute.multiValued)
    return attribute.type === 'complex' && value !== null
      ? complex(attribute, value, attribute.name)
      : simple(attribute, value, attribute.name);
  if (filter) return complex(attribute, value, path.text);
  if (value === null) return null;
  // One value where a list is due: taken as a list of one.
  const values = Array.isArray(value) ? value : [value];
  if (attribute.type !== 'complex') return values.map((item) => simple(attribute, item, attribute.name));
  const required = attribute.subAttributes?.filter((sub) => sub.required) ?? [];
  return values.map((item) => {
    const checked = complex(attribute, item, attribute.name);
    for (const sub of required)
      if (checked[sub.name] == null || checked[sub.name] === '')
        throw badRequest('invalidValue', `Each value of ${attribute.name} has a ${sub.name}`);
    return checked;
  });
}

function readOp(given: unknown): ScimPatchOp {
  const op = typeof given === 'string' ? given.toLowerCase() : undefined;
  if (op === 'add' || op === 'replace' || op === 'remove') return op;
  throw badRequest('invalidSyntax', 'Each operation has an op: add, replace or remove');
}

function readOperation(raw: unknown, schema: ScimPatchSchema): ScimPatchOperation[] {
  if (!isObject(raw)) throw badRequest('invalidSyntax', 'Each operation is an object');
  const op = readOp(raw.op);
  const { path, value } = raw;
  if (path !== undefined && path !== null && typeof path !== 'string')
    throw badRequest('invalidSyntax', 'An operation path is a string');
  if (op !== 'remove' && value === undefined) throw badRequest('invalidSyntax', `${op} needs a value`);
  if (typeof path === 'string' && path.trim() !== '') {
    if (isIgnoredPath(path, schema)) return [];
    const parsed = parsePatchPath(path, schema);
    return [{ op, path: parsed, ...(value === undefined ? {} : { value: normalize(parsed, value) }) }];
  }
  if (op === 'remove') throw badRequest('noTarget', 'remove needs a path');
  // No path: the value holds attributes of the resource, each key a path (RFC 7644 section 3.5.2.1).
  if (!isObject(value)) throw badRequest('invalidSyntax', `${op} without a path takes an object of attributes`);
  const urn = PATCH_SCHEMAS[schema].urn;
  return Object.entries(value).flatMap(([key, inner]) => {
    // The core schema's URN as a key holds attributes too.
    if (key.toLowerCase() === urn.toLowerCase() && isObject(inner)) return readOperation({ op, value: inner }, schema);
    if (isIgnoredPath(key, schema)) return [];
    const parsed = parsePatchPath(key, schema);
    return [{ op, path: parsed, value: normalize(parsed, inner) }];
  });
}

/**
 * Reads a PATCH body. Refusals are ScimError 400: invalidSyntax (the
 * message's shape), invalidPath, invalidFilter (a path's value filter),
 * invalidValue (a value's type), noTarget (remove without a path).
 */
export function parseScimPatch(body: unknown, schema: ScimPatchSchema): ScimPatchOperation[] {
  if (!isObject(body)) throw badRequest('invalidSyntax', 'A PATCH body is a PatchOp message object');
  const schemas = body.schemas;
  if (
    !Array.isArray(schemas) ||
    !schemas.some((urn) => typeof urn === 'string' && urn.toLowerCase() === PATCH_OP_URN.toLowerCase())
  )
    throw badRequest('invalidSyntax', `schemas must be ["${PATCH_OP_URN}"]`);
  const operations = body.Operations ?? body.operations;
  if (!Array.isArray(operations) || operations.length === 0)
    throw badRequest('invalidSyntax', 'Operations is a non-empty array');
  if (operations.length > MAX_PATCH_OPERATIONS)
    throw badRequest('invalidSyntax', `At most ${MAX_PATCH_OPERATIONS} operations per request`);
  return operations.flatMap((operation) => readOperation(operation, schema));
}
