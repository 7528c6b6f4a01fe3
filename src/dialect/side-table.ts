/**
 * Side tables: the small tables a broker creates if missing beside the queue tables (heartbeat,
 * schedules, dedupe windows, queue controls, cancellations, maintenance, rate limits, concurrency
 * guards and slots), so a feature needs no migration. What every one of them shares lives here:
 * how a database spells their names and column types, the `name` or `schema.name` a broker option
 * gives, and the `CREATE TABLE IF NOT EXISTS` text. The statements over each table stay in its own
 * module; creating one, and what a concurrent creator's error means, is driver work
 * (driver/side-table-creation.ts).
 */
import { parseQualifiedName, validatePostgresIdentifier } from '../table/identifier.js';
import { BACKTICK_STYLE, DOUBLE_QUOTE_STYLE, fixedSql, identifier, joinSql, qualifiedName, renderDdl, sql, type SqlStyle, type SqlText } from './quoting.js';

export type SideTableDatabase = 'postgres' | 'mysql' | 'mariadb' | 'sqlite';

/** Where a side table lives: `name`, or `schema.name` (a database on MySQL, MariaDB and SQLite). */
export interface SideTable {
  readonly schema: string | undefined;
  readonly name: string;
}

/** The column types that side tables share, as one database spells them. */
export interface SideTableTypes {
  /** An instant: the database's now or a bound host time. */
  readonly time: string;
  /**
   * Text of up to `length` characters that compares exactly whatever the database's default
   * collation (MySQL, MariaDB: `utf8mb4_bin`, which both flavours have; a broker creates the table
   * before it knows which one it talks to). Its PAD SPACE is harmless for ids and names that never
   * end in a space.
   */
  exactText(length: number): string;
  /**
   * A key part of up to 255 characters of any script that compares byte for byte, without naming a
   * collation (MySQL, MariaDB: 1,020 bytes; three of them make 3,060 bytes, under InnoDB's 3,072).
   */
  readonly binaryKey: string;
}

const POSTGRES_TYPES: SideTableTypes = { time: 'timestamptz', exactText: () => 'text', binaryKey: 'text' };
const MYSQL_TYPES: SideTableTypes = {
  time: 'datetime(6)',
  exactText: (length) => `varchar(${length}) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`,
  binaryKey: 'varbinary(1020)',
};
const SQLITE_TYPES: SideTableTypes = { time: 'text', exactText: () => 'text', binaryKey: 'text' };

/** Postgres quotes names with `"`, the others with backticks. */
export function sideTableStyle(database: SideTableDatabase): SqlStyle {
  return database === 'postgres' ? DOUBLE_QUOTE_STYLE : BACKTICK_STYLE;
}

export function sideTableTypes(database: SideTableDatabase): SideTableTypes {
  switch (database) {
    case 'postgres':
      return POSTGRES_TYPES;
    case 'mysql':
    case 'mariadb':
      return MYSQL_TYPES;
    case 'sqlite':
      return SQLITE_TYPES;
  }
}

/**
 * Parses and validates `name` or `schema.name` for a side table on `database`; `what` names the
 * table in a refusal ("heartbeat table"). Postgres also holds each name to its 63 bytes.
 */
export function parseSideTable(value: string, database: SideTableDatabase, what: string): SideTable {
  const parsed = parseQualifiedName(value, what);
  if (database === 'postgres') {
    validatePostgresIdentifier(parsed.name, what);
    if (parsed.schema !== undefined) validatePostgresIdentifier(parsed.schema, `schema of ${what}`);
  }
  return Object.freeze({ schema: parsed.schema, name: parsed.name });
}

/** The table's name as SQL text, schema-qualified where it names a schema. */
export function sideTableName(table: SideTable): SqlText {
  return qualifiedName(table.schema, table.name);
}

/** One column: its name, and its type with NULL or NOT NULL (and any default) as the database spells them. */
export type SideTableColumn = readonly [name: string, definition: string];

/** What a side table holds: its columns in order and its primary key. */
export interface SideTableShape {
  readonly columns: readonly SideTableColumn[];
  /**
   * A key of one column is declared on that column (`… NOT NULL PRIMARY KEY`); a longer one in a
   * clause of its own after the columns.
   */
  readonly primaryKey: readonly [string, ...string[]];
}

/**
 * `CREATE TABLE IF NOT EXISTS`, one column a line. Run by the broker that needs the table, or
 * printed for a migration (`tablequeue init --side-tables`).
 */
export function renderCreateSideTable(database: SideTableDatabase, table: SideTable, shape: SideTableShape): string {
  const [firstKey, ...restOfKey] = shape.primaryKey;
  const inlineKey = restOfKey.length === 0 ? firstKey : undefined;
  for (const column of shape.primaryKey) {
    if (!shape.columns.some(([name]) => name === column)) {
      throw new TypeError(`side table "${table.name}": primary key column "${column}" is not among its columns`);
    }
  }
  const lines = shape.columns.map(([name, definition]) =>
    name === inlineKey ? sql`  ${identifier(name)} ${fixedSql(definition)} PRIMARY KEY` : sql`  ${identifier(name)} ${fixedSql(definition)}`,
  );
  if (inlineKey === undefined) lines.push(sql`  PRIMARY KEY (${joinSql(shape.primaryKey.map(identifier), ', ')})`);
  return renderDdl(sideTableStyle(database), sql`CREATE TABLE IF NOT EXISTS ${sideTableName(table)} (\n${joinSql(lines, ',\n')}\n)`);
}
