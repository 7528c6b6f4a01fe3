import type { Statement } from '../../statement.js';
import type { TableSpec } from '../../table/table-spec.js';
import { tableOf } from '../claim-clauses.js';
import type { TextCollationStatements } from '../dialect.js';
import { BACKTICK_STYLE, fixedSql, identifier, joinSql, renderDdl, renderStatement, sql, textLiteral } from '../quoting.js';

/**
 * The collation of the text columns that name rows: code point by code point, trailing spaces
 * included, so `welcome`, `Welcome`, `welcome ` and `wélcome` are four queues. `utf8mb4_bin`
 * is not enough: it is PAD SPACE on both servers ('welcome ' = 'welcome'). MariaDB's NO PAD
 * binary collation is `utf8mb4_nopad_bin` (10.2+); MySQL's is `utf8mb4_0900_bin` (8.0.17+).
 */
export function exactTextCollation(options: { mariadb: boolean }): string {
  return options.mariadb ? 'utf8mb4_nopad_bin' : 'utf8mb4_0900_bin';
}

/** The column clause that gives a text column the exact collation, whatever the table's default. */
export function exactTextCharset(options: { mariadb: boolean }): string {
  return `CHARACTER SET utf8mb4 COLLATE ${exactTextCollation(options)}`;
}

/** The text columns a statement compares to name rows: the group, the partition key, a supplied id. */
function rowNamingColumns(spec: TableSpec): string[] {
  const columns = spec.id.generated ? [] : [spec.id.column];
  if (spec.group !== undefined) columns.push(spec.group.column);
  if (spec.partitionKey !== undefined) columns.push(spec.partitionKey);
  return columns;
}

/**
 * Reads the collations from information_schema, which shows a user only the columns it may
 * use: the same columns its statements name. Columns of other types have no collation and are
 * left out.
 */
export function createMysqlTextCollation(options: { mariadb: boolean }): TextCollationStatements {
  return Object.freeze({
    read: (spec: TableSpec): Statement | undefined => {
      const columns = rowNamingColumns(spec);
      if (columns.length === 0) return undefined;
      const schema = spec.schema === undefined ? sql`DATABASE()` : textLiteral(spec.schema);
      const names = joinSql(columns.map(textLiteral), ', ');
      return renderStatement(
        BACKTICK_STYLE,
        'schema.textCollation',
        sql`SELECT COLUMN_NAME AS ${identifier('column')}, COLLATION_NAME AS ${identifier('collation')}, COLUMN_TYPE AS ${identifier('type')}, IS_NULLABLE AS ${identifier('nullable')} FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ${schema} AND TABLE_NAME = ${textLiteral(spec.name)} AND COLUMN_NAME IN (${names}) AND COLLATION_NAME IS NOT NULL ORDER BY ORDINAL_POSITION`,
      );
    },
    ignoredBy,
    renderFix: (spec: TableSpec, column: { name: string; type: string; isNullable: boolean }): string =>
      renderDdl(
        BACKTICK_STYLE,
        sql`ALTER TABLE ${tableOf(spec)} MODIFY ${identifier(column.name)} ${fixedSql(column.type)} ${fixedSql(exactTextCharset(options))} ${fixedSql(column.isNullable ? 'NULL' : 'NOT NULL')}`,
      ),
  });
}

/**
 * Reads the collation's name, which both servers build from the same parts: `_ci` ignores case,
 * `_ai` accents (and so does a `_ci` without `_as`, such as `utf8mb4_general_ci`), and every
 * collation is PAD SPACE but the `_nopad_` ones (MariaDB) and the `_0900_` ones (MySQL). A
 * collation other than `_bin` that ignores none of these still weighs some distinct characters
 * alike (ignorable and compatibility characters).
 */
function ignoredBy(collation: string): readonly string[] {
  const name = collation.toLowerCase();
  if (name === 'binary') return [];
  const has = (part: string) => new RegExp(`_${part}(_|$)`).test(name);
  const ignored: string[] = [];
  if (has('ci')) ignored.push('case');
  if (has('ai') || (has('ci') && !has('as'))) ignored.push('accents');
  if (!name.includes('_nopad_') && !name.includes('_0900_')) ignored.push('trailing spaces');
  if (!has('bin') && ignored.length === 0) ignored.push('differences between characters it weighs alike');
  return ignored;
}
