import { type Expression, type RawBuilder, type SqlBool, sql } from 'kysely';

/**
 * A validated SCIM filter (RFC 7644 section 3.4.2.2) as SQL, for the Users
 * and Groups lists (docs/scim.md). The tree is the one the SCIM grammar
 * (src/scim/filter.ts) validates against the attributes it knows; each
 * attribute's `column` is its canonical SCIM name, mapped here to a column.
 * Values are always bound parameters. A comparison with an absent value
 * (NULL) is false, so `not` of it is true, as a JSON evaluation would say.
 */

type CompareOp = 'eq' | 'ne' | 'co' | 'sw' | 'ew' | 'gt' | 'ge' | 'lt' | 'le';

interface FilterAttribute {
  type: 'string' | 'boolean' | 'dateTime';
  caseExact: boolean;
  column: string;
}

/** The shape of src/scim/filter.ts's ScimFilter (db/ imports nothing above it). */
export type FilterNode =
  | { op: 'and' | 'or'; left: FilterNode; right: FilterNode }
  | { op: 'not'; filter: FilterNode }
  | { op: CompareOp; path: string; attribute: FilterAttribute; value: string | boolean | Date | null }
  | { op: 'pr'; path: string; attribute: FilterAttribute }
  | { op: 'valuePath'; path: string; filter: FilterNode };

type Sql = RawBuilder<unknown>;

/** A column, or a constant for what every resource has (a User's one email is its work and primary one). */
type Source = { column: Sql } | { constant: string | boolean };

/** The SCIM names of the Users list (scim_users as `su`, users as `u`). */
const USER_SOURCES: Record<string, Source> = {
  id: { column: sql`su.user_id::text` },
  externalId: { column: sql.ref('su.external_id') },
  userName: { column: sql.ref('u.email') },
  'emails.value': { column: sql.ref('u.email') },
  'emails.type': { constant: 'work' },
  'emails.primary': { constant: true },
  displayName: { column: sql.ref('u.name') },
  'name.formatted': { column: sql.ref('u.name') },
  active: { column: sql.ref('su.active') },
  'meta.created': { column: sql.ref('su.created_at') },
  'meta.lastModified': { column: sql.ref('su.updated_at') },
};

/** The SCIM names of the Groups list (scim_groups, not aliased). `members.value` is a set: see groupFilterSql. */
const GROUP_SOURCES: Record<string, Source> = {
  id: { column: sql`scim_groups.id::text` },
  externalId: { column: sql.ref('scim_groups.external_id') },
  displayName: { column: sql.ref('scim_groups.display_name') },
  'meta.created': { column: sql.ref('scim_groups.created_at') },
  'meta.lastModified': { column: sql.ref('scim_groups.updated_at') },
  'members.value': { column: sql`gm.user_id::text` },
};

const TRUE = sql<SqlBool>`true`;
const FALSE = sql<SqlBool>`false`;

/**
 * RFC 7643 section 2.2 caseExact false, as src/scim/filter.ts `foldCase`:
 * ASCII letters only. `lower()` would fold by the database's locale
 * (`\u00C9` to `\u00E9`, KELVIN SIGN to `k`), which the service never does.
 */
const foldCase = (value: Sql): Sql =>
  sql`translate(${value}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')`;

/** One comparison; `left` is the column (or constant) as SQL. */
function comparison(left: Sql, op: CompareOp, attribute: FilterAttribute, value: string | boolean | Date | null): Sql {
  if (value === null) return op === 'eq' ? sql`${left} is null` : sql`${left} is not null`;
  // meta times are answered to the millisecond: compared the same way.
  const column = attribute.type === 'dateTime' ? sql`date_trunc('milliseconds', ${left})` : left;
  const folded = attribute.type === 'string' && !attribute.caseExact;
  const lhs = folded ? foldCase(column) : column;
  const bound =
    attribute.type === 'dateTime'
      ? sql`${(value as Date).toISOString()}::timestamptz`
      : attribute.type === 'boolean'
        ? sql`${value}::boolean`
        : sql`${String(value)}::text`;
  const rhs = folded ? foldCase(bound) : bound;
  switch (op) {
    case 'eq':
      return sql`${lhs} = ${rhs}`;
    case 'ne':
      return sql`${lhs} is distinct from ${rhs}`;
    case 'co':
      return sql`strpos(${lhs}, ${rhs}) > 0`;
    case 'sw':
      return sql`starts_with(${lhs}, ${rhs})`;
    case 'ew':
      return sql`right(${lhs}, char_length(${rhs})) = ${rhs}`;
    case 'gt':
      return sql`${lhs} > ${rhs}`;
    case 'ge':
      return sql`${lhs} >= ${rhs}`;
    case 'lt':
      return sql`${lhs} < ${rhs}`;
    case 'le':
      return sql`${lhs} <= ${rhs}`;
  }
}

/** RFC 7644 section 3.4.2.2: `pr` is a value that is neither null nor empty. */
function present(left: Sql, attribute: FilterAttribute): Sql {
  return attribute.type === 'string' ? sql`(${left} is not null and ${left} <> '')` : sql`${left} is not null`;
}

function leftOf(source: Source, attribute: FilterAttribute): Sql {
  if ('column' in source) return source.column;
  return attribute.type === 'boolean' ? sql`${source.constant}::boolean` : sql`${String(source.constant)}::text`;
}

function compile(node: FilterNode, sources: Record<string, Source>, scoped: (inner: Sql) => Sql): Sql {
  switch (node.op) {
    case 'and':
      return sql`(${compile(node.left, sources, scoped)} and ${compile(node.right, sources, scoped)})`;
    case 'or':
      return sql`(${compile(node.left, sources, scoped)} or ${compile(node.right, sources, scoped)})`;
    case 'not':
      return sql`(not ${compile(node.filter, sources, scoped)})`;
    case 'valuePath':
      // One value of the attribute must satisfy the whole inner filter.
      return scoped(compile(node.filter, sources, (inner) => inner));
    default: {
      const source = sources[node.attribute.column];
      // The grammar only lets through attributes of the resource: anything else matches nothing.
      if (!source) return FALSE;
      const left = leftOf(source, node.attribute);
      const test =
        node.op === 'pr' ? present(left, node.attribute) : comparison(left, node.op, node.attribute, node.value);
      return node.attribute.column === 'members.value' ? scoped(test) : sql`coalesce(${test}, false)`;
    }
  }
}

/** The filter over the Users list's `scim_users as su` joined to `users as u`. */
export function userFilterSql(filter: FilterNode | undefined): Expression<SqlBool> {
  if (!filter) return TRUE;
  return sql<SqlBool>`${compile(filter, USER_SOURCES, (inner) => sql`coalesce(${inner}, false)`)}`;
}

/**
 * The filter over `scim_groups`. `members.value` holds when one member
 * satisfies it (with `members[...]`, one member satisfies all of it).
 */
export function groupFilterSql(filter: FilterNode | undefined): Expression<SqlBool> {
  if (!filter) return TRUE;
  const anyMember = (inner: Sql) => sql`exists (
    select 1 from scim_group_members gm
    where gm.tenant_id = scim_groups.tenant_id and gm.group_id = scim_groups.id and coalesce(${inner}, false)
  )`;
  return sql<SqlBool>`${compile(filter, GROUP_SOURCES, anyMember)}`;
}
