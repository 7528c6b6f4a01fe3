/**
 * Creating a side table (dialect/side-table.ts) the way brokers do at start: any number of them at
 * once, on a database where it may be missing.
 *
 * PostgreSQL's `CREATE TABLE IF NOT EXISTS` looks for the table before it writes the catalogue
 * rows, and nothing orders two creators between the look and the write: of brokers starting
 * together on a fresh database all find no table, the first to commit makes it, and the others
 * fail on the catalogue's unique indexes, mostly `23505` on `pg_type_typname_nsp_index` (the
 * table's row type), else on `pg_class_relname_nsp_index`, or with `42P07` duplicate_table, or
 * with `42710` duplicate_object, `type "…" already exists`, when the other creator committed
 * between this one's look for the relation and its look for the row type (seen once in a run of
 * the whole suite on a loaded machine). A type of that name without the table would fail the
 * same way; the table's first statement then names the missing table.
 * Measured here: six sessions creating one table at the same moment, 5 of the 6 failed with 23505
 * on pg_type in each of 20 rounds. The unique check waits for the other creator and fails only
 * once it committed, so each of these errors means the table is there: it is the outcome asked for,
 * not a failure, and trying the statement again would be a guess.
 *
 * MySQL and MariaDB serialize DDL on a metadata lock, so `IF NOT EXISTS` only warns; should a
 * server report 1050 (table exists) as an error, it means the same. SQLite creates under its one
 * write lock.
 */
import { StatementError } from '../errors.js';
import type { BoundStatement } from '../statement.js';

/** The PostgreSQL catalogue indexes a racing `CREATE TABLE` fails on: the row type's and the relation's names. */
const CATALOGUE_NAME_INDEXES: ReadonlySet<string> = new Set(['pg_type_typname_nsp_index', 'pg_class_relname_nsp_index']);

const UNIQUE_VIOLATION = '23505';
const DUPLICATE_TABLE = '42P07';
const DUPLICATE_OBJECT = '42710';
const MYSQL_TABLE_EXISTS_ERRNO = 1050;

/** A `Driver` or a `Connection`: whatever runs the statement. */
export interface StatementRunner {
  execute(statement: BoundStatement): Promise<unknown>;
}

/**
 * Whether `error`, from a `CREATE TABLE IF NOT EXISTS`, says that another session created the
 * table meanwhile.
 */
export function isCreatedByAnother(error: unknown): boolean {
  if (!(error instanceof StatementError)) return false;
  if (error.sqlState === DUPLICATE_TABLE || error.sqlState === DUPLICATE_OBJECT) return true;
  if (error.sqlState === UNIQUE_VIOLATION) return CATALOGUE_NAME_INDEXES.has(violatedIndexOf(error));
  return error.errno === MYSQL_TABLE_EXISTS_ERRNO;
}

/**
 * The index a Postgres unique violation names: pg's server error (the cause a StatementError keeps)
 * carries it as `constraint`, apart from the message, which the server's language setting may translate.
 */
function violatedIndexOf(error: StatementError): string {
  const cause = error.cause as { constraint?: unknown } | null | undefined;
  return typeof cause?.constraint === 'string' ? cause.constraint : '';
}

/**
 * Runs a side table's `CREATE TABLE IF NOT EXISTS` (`ddl`, named `name` in errors); it resolves
 * once the table exists, whoever created it, and throws any other failure (a role that may not
 * create tables, a lost connection) as it came. On PostgreSQL, run it outside a transaction: a
 * creator that lost the race has its transaction aborted.
 */
export async function createSideTable(runner: StatementRunner, name: string, ddl: string): Promise<void> {
  try {
    await runner.execute({ name, sql: ddl, values: [] });
  } catch (error) {
    if (!isCreatedByAnother(error)) throw error;
  }
}
