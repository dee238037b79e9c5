import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { sql } from 'kysely';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SchemalessDb } from '../../src/db/client.js';
import { openTestDatabase, type TestDatabase } from '../support/database.js';

/**
 * src/db/database.ts is written by hand; this test holds it to the migrated
 * schema. Per table of `Database`: the same columns as information_schema,
 * the same nullability (a column the interface types `| null` is nullable,
 * and only those), and the same coarse type of what a SELECT returns. The
 * interface is read with the TypeScript compiler, through Kysely's own
 * `Selectable`, so `Generated<…>` and `ColumnType<…>` resolve as queries see them.
 */

type Coarse = 'string' | 'number' | 'boolean' | 'Date' | 'Json' | 'string[]';
interface Column {
  type: Coarse | `unknown ${string}`;
  nullable: boolean;
}
type Tables = Record<string, Record<string, Column>>;

const DATABASE_TS = resolve('src/db/database.ts');

/** The interface's tables and columns, from the given text of src/db/database.ts. */
function interfaceTables(text = readFileSync(DATABASE_TS, 'utf8')): Tables {
  const probePath = resolve('src', 'db', '__table_types_probe.ts');
  const probe = `import type { Selectable } from 'kysely';
import type { Database } from './database.js';
export type Probe = { [K in keyof Database]: Selectable<Database[K]> };\n`;
  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, language, ...rest) => {
    if (resolve(fileName) === probePath) return ts.createSourceFile(fileName, probe, language);
    if (resolve(fileName) === DATABASE_TS) return ts.createSourceFile(fileName, text, language);
    return getSourceFile(fileName, language, ...rest);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (fileName) => resolve(fileName) === probePath || fileExists(fileName);
  const program = ts.createProgram([probePath], options, host);
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(probePath);
  const alias = source?.statements.find(ts.isTypeAliasDeclaration);
  if (!alias) throw new Error('the probe did not compile');
  const probeType = checker.getTypeAtLocation(alias.name);
  const tables: Tables = {};
  for (const table of checker.getPropertiesOfType(probeType)) {
    const tableType = checker.getTypeOfSymbol(table);
    tables[table.name] = {};
    for (const column of checker.getPropertiesOfType(tableType)) {
      tables[table.name]![column.name] = coarseOf(checker, checker.getTypeOfSymbol(column));
    }
  }
  return tables;
}

function coarseOf(checker: ts.TypeChecker, type: ts.Type): Column {
  const parts = type.isUnion() ? type.types : [type];
  const nullable = parts.some((part) => part.flags & ts.TypeFlags.Null);
  const kinds = new Set(
    parts
      .filter((part) => !(part.flags & (ts.TypeFlags.Null | ts.TypeFlags.Undefined)))
      .map((part): Column['type'] => {
        if (part.flags & ts.TypeFlags.StringLike) return 'string';
        if (part.flags & ts.TypeFlags.NumberLike) return 'number';
        if (part.flags & ts.TypeFlags.BooleanLike) return 'boolean';
        if (part.symbol?.name === 'Date') return 'Date';
        if (checker.isArrayType(part)) {
          const [element] = checker.getTypeArguments(part as ts.TypeReference);
          return element && element.flags & ts.TypeFlags.StringLike ? 'string[]' : 'Json';
        }
        if (part.flags & ts.TypeFlags.Object) return 'Json';
        return `unknown ${checker.typeToString(part)}`;
      }),
  );
  const [only, ...others] = [...kinds];
  return { type: only && others.length === 0 ? only : `unknown ${checker.typeToString(type)}`, nullable };
}

/** PostgreSQL's type of a column, as the drivers (postgres.js, PGlite) hand it to a query. */
function coarseOfPg(dataType: string, udtName: string): Column['type'] {
  if (dataType === 'ARRAY') return udtName === '_text' || udtName === '_varchar' ? 'string[]' : `unknown ${udtName}`;
  if (['uuid', 'text', 'character varying', 'citext', 'inet', 'bigint', 'USER-DEFINED'].includes(dataType)) {
    // bigint is read as a string: a JavaScript number cannot hold every value.
    return 'string';
  }
  if (['integer', 'smallint', 'real', 'double precision'].includes(dataType)) return 'number';
  if (dataType === 'boolean') return 'boolean';
  if (dataType.startsWith('timestamp') || dataType === 'date') return 'Date';
  if (dataType === 'jsonb' || dataType === 'json') return 'Json';
  return `unknown ${dataType}`;
}

/** The migrated schema's tables and columns, from information_schema. */
async function schemaTables(db: SchemalessDb): Promise<Tables> {
  const { rows } = await sql<{ table: string; column: string; data_type: string; udt_name: string; nullable: string }>`
    select c.table_name as "table", c.column_name as "column", c.data_type, c.udt_name, c.is_nullable as nullable
      from information_schema.columns c
      join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name
     where c.table_schema = 'public' and t.table_type = 'BASE TABLE' and c.table_name not like 'kysely_%'
     order by c.table_name, c.ordinal_position`.execute(db);
  const tables: Tables = {};
  for (const row of rows) {
    tables[row.table] ??= {};
    tables[row.table]![row.column] = {
      type: coarseOfPg(row.data_type, row.udt_name),
      nullable: row.nullable === 'YES',
    };
  }
  return tables;
}

/** Every difference, one readable line each (empty when they agree). */
function differences(declared: Tables, migrated: Tables): string[] {
  const lines: string[] = [];
  for (const table of new Set([...Object.keys(declared), ...Object.keys(migrated)])) {
    const inInterface = declared[table];
    const inSchema = migrated[table];
    if (!inInterface) lines.push(`${table}: a table the Database interface lacks`);
    if (!inSchema) lines.push(`${table}: in the Database interface, not in the schema`);
    if (!inInterface || !inSchema) continue;
    for (const column of new Set([...Object.keys(inInterface), ...Object.keys(inSchema)])) {
      const a = inInterface[column];
      const b = inSchema[column];
      if (!a) lines.push(`${table}.${column}: a column the interface lacks`);
      else if (!b) lines.push(`${table}.${column}: in the interface, not in the schema`);
      else if (a.type !== b.type || a.nullable !== b.nullable) {
        const show = (c: Column) => `${c.type}${c.nullable ? ' | null' : ''}`;
        lines.push(`${table}.${column}: interface ${show(a)}, schema ${show(b)}`);
      }
    }
  }
  return lines;
}

describe('the Database interface (src/db/database.ts) against information_schema', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await openTestDatabase();
  });
  afterAll(() => database?.close());

  it('declares every table and column of the migrated schema, with its nullability and type', async () => {
    const declared = interfaceTables();
    expect(Object.keys(declared).length).toBeGreaterThan(10);
    expect(differences(declared, await database.withOwner(schemaTables))).toEqual([]);
  });

  it('reports a column a migration adds that the interface lacks (a throwaway column, rolled back)', async () => {
    const rolledBack = new Error('roll back');
    let migrated: Tables = {};
    await expect(
      database.withOwner((owner) =>
        owner.transaction().execute(async (trx) => {
          await sql`alter table roles add column colour text`.execute(trx);
          await sql`alter table roles alter column description drop not null`.execute(trx);
          migrated = await schemaTables(trx);
          throw rolledBack;
        }),
      ),
    ).rejects.toBe(rolledBack);
    expect(differences(interfaceTables(), migrated)).toEqual([
      'roles.description: interface string, schema string | null',
      'roles.colour: a column the interface lacks',
    ]);
  });

  it('reports a column the interface names that the schema does not have, or types otherwise', async () => {
    const text = readFileSync(DATABASE_TS, 'utf8').replace(
      'export interface RolesTable {\n  id: Generated<string>;',
      'export interface RolesTable {\n  id: Generated<number>;\n  ghost: string;',
    );
    expect(differences(interfaceTables(text), await database.withOwner(schemaTables))).toEqual([
      'roles.id: interface number, schema string',
      'roles.ghost: in the interface, not in the schema',
    ]);
  });
});
