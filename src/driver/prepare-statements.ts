import { SchemaError, StatementError } from '../errors.js';
import { bindStatement, type Statement } from '../statement.js';
import { withConnection } from './connection-scope.js';
import type { Driver } from './driver.js';

/** What the statements serve, for the message: `table "jobs"`, `outbox "app.outbox"`. */
export interface PreparedFor {
  readonly kind: 'table' | 'outbox';
  readonly table: string;
  /** The table dead letters move into, when they move into one. */
  readonly deadLetterTable?: { readonly schema: string | undefined; readonly name: string } | undefined;
}

/**
 * A statement the server refused while preparing or probing means the table is not what the
 * declaration says: a `SchemaError` naming the table and the statement. Other failures pass as they are.
 */
export function schemaErrorOf(preparedFor: PreparedFor, statement: Statement, error: unknown): unknown {
  if (!(error instanceof StatementError)) return error;
  const { kind, table, deadLetterTable } = preparedFor;
  const reason = error.cause instanceof Error ? error.cause.message : error.message;
  // The service's own text (defineTable's statements) is what to fix, not the table.
  const fix = statement.name.startsWith('statements.')
    ? `fix its text in defineTable({ statements }), or the tables and columns it names`
    : deadLetterTable !== undefined && statement.name.startsWith('settle.deadLetter')
      ? deadLetterFix(table, deadLetterTable)
      : 'create the table with createTableSql() or fix its columns';
  return new SchemaError({
    table,
    statement: statement.name,
    message: `${kind} "${table}": statement "${statement.name}" does not prepare on ${error.database} (${reason}); ${fix}`,
    cause: error,
  });
}

/**
 * The move into a dead-letter table copies each column as it is, so a column of another type
 * there (a payload declared `json` on one side only, say) does not prepare.
 */
function deadLetterFix(table: string, deadLetter: NonNullable<PreparedFor['deadLetterTable']>): string {
  const { schema, name } = deadLetter;
  const label = schema === undefined ? name : `${schema}.${name}`;
  const names = schema === undefined ? `table: '${name}'` : `schema: '${schema}', table: '${name}'`;
  return (
    `the dead-letter table "${label}" needs the columns of "${table}", of the same types: create it from the queue table's ` +
    `declaration under its own name (defineTable({ ...declaration, ${names} }).createTableSql()), or fix its columns`
  );
}

/**
 * Prepares every statement on one pooled connection at start, so a missing table or column fails
 * `start()` instead of the first claim. A connection that saw a failure is destroyed, not reused.
 */
export async function prepareStatements(driver: Driver, statements: readonly Statement[], preparedFor: PreparedFor): Promise<void> {
  await withConnection(driver, async (connection) => {
    for (const statement of statements) {
      const placeholders = Object.fromEntries(statement.params.map((param) => [param, null]));
      try {
        await connection.prepare(bindStatement(statement, placeholders));
      } catch (error) {
        throw schemaErrorOf(preparedFor, statement, error);
      }
    }
  });
}
