/**
 * The seen table of a deduplicating subscription: one row per (consumer, outbox record id) a
 * handler finished. The consumer is the subscription's queue label, so one table serves every
 * subscription of a service. The table's columns are fixed; only its name is declared.
 */
import type { Statement } from '../statement.js';
import { validatePostgresIdentifier } from '../table/identifier.js';
import { exactTextCharset } from './mysql/mysql-collation.js';
import { BACKTICK_STYLE, DOUBLE_QUOTE_STYLE, fixedSql, identifier, param, qualifiedName, renderDdl, renderStatement, sql, type SqlStyle } from './quoting.js';

/** `mariadb` changes only the DDL, whose exact collation has another name there than on MySQL. */
export type SeenDatabase = 'postgres' | 'mysql' | 'mariadb' | 'sqlite';

export interface SeenTableName {
  readonly schema: string | undefined;
  readonly name: string;
}

export const SEEN_CONSUMER_COLUMN = 'consumer';
export const SEEN_RECORD_ID_COLUMN = 'record_id';
export const SEEN_AT_COLUMN = 'seen_at';

export interface SeenStatements {
  /** One row, column `seen`, when the consumer handled the record (params `column:consumer`, `column:record_id`). */
  readonly find: Statement;
  /** Writes the pair; a pair already there (or being written by an open transaction) writes nothing. */
  readonly insert: Statement;
}

/**
 * Text columns sized for an index on every database: MySQL's utf8mb4 primary key of two
 * VARCHAR(255) takes 2,040 bytes, under InnoDB's 3,072. On MySQL and MariaDB they compare
 * exactly (mysql-collation.ts): under the default collation a record id "A1" would count as
 * seen once "a1" was.
 */
const COLUMN_TYPES: Record<SeenDatabase, { readonly text: string; readonly seenAt: string; readonly suffix: string }> = {
  postgres: { text: 'TEXT NOT NULL', seenAt: 'TIMESTAMPTZ NOT NULL DEFAULT now()', suffix: '' },
  mysql: mysqlColumnTypes({ mariadb: false }),
  mariadb: mysqlColumnTypes({ mariadb: true }),
  sqlite: { text: 'TEXT NOT NULL', seenAt: "TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'))", suffix: '' },
};

function mysqlColumnTypes(options: { mariadb: boolean }) {
  return {
    text: `VARCHAR(255) ${exactTextCharset(options)} NOT NULL`,
    seenAt: 'DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))',
    suffix: ' ENGINE=InnoDB DEFAULT CHARSET=utf8mb4',
  };
}

function isMysqlFamily(database: SeenDatabase): boolean {
  return database === 'mysql' || database === 'mariadb';
}

function styleOf(database: SeenDatabase): SqlStyle {
  return database === 'postgres' ? DOUBLE_QUOTE_STYLE : BACKTICK_STYLE;
}

/** `CREATE TABLE` of the seen table; `seen_at` lets the service delete old pairs. */
export function renderSeenCreateTable(database: SeenDatabase, table: SeenTableName): string[] {
  if (database === 'postgres') requirePostgresLength(table);
  const types = COLUMN_TYPES[database];
  const columns = [
    sql`  ${identifier(SEEN_CONSUMER_COLUMN)} ${fixedSql(types.text)}`,
    sql`  ${identifier(SEEN_RECORD_ID_COLUMN)} ${fixedSql(types.text)}`,
    sql`  ${identifier(SEEN_AT_COLUMN)} ${fixedSql(types.seenAt)}`,
    sql`  PRIMARY KEY (${identifier(SEEN_CONSUMER_COLUMN)}, ${identifier(SEEN_RECORD_ID_COLUMN)})`,
  ];
  const body = columns.slice(1).reduce((joined, column) => sql`${joined},\n${column}`, columns[0]!);
  return [renderDdl(styleOf(database), sql`CREATE TABLE ${qualifiedName(table.schema, table.name)} (\n${body}\n)${fixedSql(types.suffix)}`)];
}

export function createSeenStatements(database: SeenDatabase, table: SeenTableName): SeenStatements {
  if (database === 'postgres') requirePostgresLength(table);
  const style = styleOf(database);
  const target = qualifiedName(table.schema, table.name);
  const consumer = identifier(SEEN_CONSUMER_COLUMN);
  const recordId = identifier(SEEN_RECORD_ID_COLUMN);
  const values = sql`(${consumer}, ${recordId}) VALUES (${param(`column:${SEEN_CONSUMER_COLUMN}`)}, ${param(`column:${SEEN_RECORD_ID_COLUMN}`)})`;
  // INSERT IGNORE also turns other errors into warnings, but this insert binds two short texts
  // into text columns and nothing else, so a duplicate key is the only error it can meet.
  const insert =
    isMysqlFamily(database)
      ? sql`INSERT IGNORE INTO ${target} ${values}`
      : sql`INSERT INTO ${target} ${values} ON CONFLICT DO NOTHING`;
  return Object.freeze({
    find: renderStatement(
      style,
      'outbox.seen.find',
      sql`SELECT 1 AS ${identifier('seen')} FROM ${target} WHERE ${consumer} = ${param(`column:${SEEN_CONSUMER_COLUMN}`)} AND ${recordId} = ${param(`column:${SEEN_RECORD_ID_COLUMN}`)}`,
    ),
    insert: renderStatement(style, 'outbox.seen.insert', insert),
  });
}

function requirePostgresLength(table: SeenTableName): void {
  if (table.schema !== undefined) validatePostgresIdentifier(table.schema, 'schema of the dedupe table');
  validatePostgresIdentifier(table.name, 'dedupe table');
}
