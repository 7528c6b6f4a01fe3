/**
 * Dropping a queue table, all four databases: for `tablequeue/testing`, which creates the tables
 * a test names and removes them when the test broker stops (and before it creates them, so a run
 * that died before its stop leaves nothing in the way of the next one).
 */
import type { DdlDialectName } from '../definition/define-table.js';
import type { Statement } from '../statement.js';
import { BACKTICK_STYLE, DOUBLE_QUOTE_STYLE, qualifiedName, renderStatement, sql } from './quoting.js';

export function dropTableIfExists(database: DdlDialectName, table: { readonly schema: string | undefined; readonly name: string }): Statement {
  const style = database === 'postgres' ? DOUBLE_QUOTE_STYLE : BACKTICK_STYLE;
  return renderStatement(style, 'testing.dropTable', sql`DROP TABLE IF EXISTS ${qualifiedName(table.schema, table.name)}`);
}
