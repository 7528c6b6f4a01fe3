import { randomUUID } from 'node:crypto';
import {
  createDedupeWindowStatements,
  DEDUPE_WINDOW_COLUMNS,
  DEFAULT_DEDUPE_WINDOWS_TABLE,
  parseDedupeWindowsTable,
  type DedupeWindowDatabase,
  type DedupeWindowStatements,
  type DedupeWindowsTable,
} from '../dialect/dedupe-window-statements.js';
import type { Dialect } from '../dialect/dialect.js';
import { withConnection } from '../driver/connection-scope.js';
import type { Connection, Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { SchemaError } from '../errors.js';
import { bindStatement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

const c = DEDUPE_WINDOW_COLUMNS;

/** The `dedupeForMs` windows of one database: its table, made before the first window opens. */
export class DedupeWindows {
  readonly #table: DedupeWindowsTable;
  readonly #statements: DedupeWindowStatements;
  /** SQLite: the table is made on the publish's own connection, before each window opens. */
  readonly #createsOnPublish: boolean;

  private constructor(table: DedupeWindowsTable, statements: DedupeWindowStatements, createsOnPublish: boolean) {
    this.#table = table;
    this.#statements = statements;
    this.#createsOnPublish = createsOnPublish;
  }

  /**
   * Creates the table if it is missing, on a connection of its own: never inside the caller's
   * transaction, where MySQL's DDL would commit it. Where the pool may be the service's own
   * session (SQLite's one handle), another connection would wait behind the service's open
   * transaction, so there the table is made on the publish's connection instead: SQLite's DDL is
   * transactional, and `IF NOT EXISTS` costs a schema lookup.
   */
  static async create(
    driver: Driver,
    database: DedupeWindowDatabase,
    tableName: string,
    options: { sharesSessionWithService: boolean },
  ): Promise<DedupeWindows> {
    const table = parseDedupeWindowsTable(tableName, database);
    const statements = createDedupeWindowStatements(database);
    if (!options.sharesSessionWithService) {
      try {
        await withConnection(driver, (connection) => createSideTable(connection, CREATE_TABLE, statements.createTable(table)));
      } catch (error) {
        throw windowsTableError(tableName, database, error);
      }
    }
    return new DedupeWindows(table, statements, options.sharesSessionWithService);
  }

  /** Opens the key's window until `now + forMs` unless one is open at `now`; true when this call opened it. */
  async open(
    connection: Connection,
    window: { spec: TableSpec; queueName: string; key: string; now: Date; forMs: number },
  ): Promise<boolean> {
    if (this.#createsOnPublish) await createSideTable(connection, CREATE_TABLE, this.#statements.createTable(this.#table));
    const token = randomUUID();
    const keyValues = {
      [`column:${c.queueTable}`]: window.spec.qualifiedName,
      [`column:${c.queueName}`]: window.queueName,
      [`column:${c.dedupeKey}`]: window.key,
    } as const;
    const opened = await connection.execute(
      bindStatement(this.#statements.open(this.#table), {
        ...keyValues,
        [`column:${c.openedBy}`]: token,
        [`column:${c.expiresAt}`]: new Date(window.now.getTime() + window.forMs),
        now: window.now,
      }),
    );
    if (this.#statements.opensInOneStatement) return opened.rows.length > 0;
    const read = await connection.execute(bindStatement(this.#statements.openedBy(this.#table), keyValues));
    return read.rows[0]?.[c.openedBy] === token;
  }
}

const CREATE_TABLE = 'dedupeWindow.createTable';

function windowsTableError(tableName: string, database: DedupeWindowDatabase, error: unknown): SchemaError {
  return new SchemaError({
    table: tableName,
    statement: CREATE_TABLE,
    message: `dedupeForMs keeps its windows in table "${tableName}", which could not be created (${error instanceof Error ? error.message : String(error)}); create it once with the DDL of createDedupeWindowsTableSql("${database}")`,
    cause: error,
  });
}

/** The id of the row holding `key`, or undefined when none does. */
export async function holderOf(
  connection: Connection,
  dialect: Dialect,
  spec: TableSpec,
  group: string | undefined,
  key: string,
  now: Date,
): Promise<string | undefined> {
  const result = await connection.execute(bindStatement(dialect.dedupe.holder(spec), { group, dedupeKey: key, now }));
  const id = result.rows[0]?.[spec.id.column];
  return id === undefined || id === null ? undefined : String(id);
}

/**
 * The `CREATE TABLE IF NOT EXISTS` of the `dedupeForMs` windows table, for a migration: a broker
 * creates it before its first throttled publish, which needs the right to create tables.
 */
export function createDedupeWindowsTableSql(
  database: 'postgres' | 'mysql' | 'mariadb' | 'sqlite',
  table: string = DEFAULT_DEDUPE_WINDOWS_TABLE,
): string {
  const flavour: DedupeWindowDatabase = database === 'mariadb' ? 'mysql' : database;
  return createDedupeWindowStatements(flavour).createTable(parseDedupeWindowsTable(table, flavour));
}
