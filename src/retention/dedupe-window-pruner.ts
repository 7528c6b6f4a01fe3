import type { Dialect } from '../dialect/dialect.js';
import {
  createDedupeWindowStatements,
  DEDUPE_WINDOW_COLUMNS,
  parseDedupeWindowsTable,
  type DedupeWindowStatements,
  type DedupeWindowsTable,
} from '../dialect/dedupe-window-statements.js';
import { PRUNE_COUNT_COLUMN } from '../dialect/retention-statements.js';
import { withTransaction } from '../driver/connection-scope.js';
import type { Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { bindStatement, type BoundStatement, type ParamValues } from '../statement.js';
import { deleteInBatches, type BatchRun } from './pruner.js';

/**
 * Deletes the `dedupeForMs` windows of one queue table that have passed. A passed window only
 * waits for its key's next publish to reopen it, and a key published once never comes back, so
 * without this the windows table grows by one row per key ever throttled. A publish that meets
 * its key's window deleted opens a new one, as it would have reopened the passed one.
 */
export class DedupeWindowPruner {
  readonly #driver: Driver;
  readonly #dialect: Dialect;
  readonly #table: DedupeWindowsTable;
  readonly #statements: DedupeWindowStatements;
  readonly #queueTable: string;

  constructor(parts: { driver: Driver; dialect: Dialect; windowsTable: string; queueTable: string }) {
    this.#driver = parts.driver;
    this.#dialect = parts.dialect;
    this.#table = parseDedupeWindowsTable(parts.windowsTable, parts.dialect.name);
    this.#statements = createDedupeWindowStatements(parts.dialect.name);
    this.#queueTable = parts.queueTable;
  }

  /** The windows table, created if missing, so that a run before the first throttled publish finds it. */
  async createTable(): Promise<void> {
    await createSideTable(this.#driver, 'dedupeWindow.createTable', this.#statements.createTable(this.#table));
  }

  /** Deletes in batches until one comes back short, or the run is told to end; the windows deleted. */
  prune(run: BatchRun): Promise<number> {
    const statement = this.#statements.prunePassed(this.#table);
    return deleteInBatches(run, () => this.#deleteBatch(bindStatement(statement, { ...this.#passedNow(), limit: run.batchSize })));
  }

  /** How many windows a prune would delete now. */
  async count(): Promise<number> {
    const result = await this.#driver.execute(bindStatement(this.#statements.countPassed(this.#table), this.#passedNow()));
    return Number(result.rows[0]?.[PRUNE_COUNT_COLUMN] ?? 0);
  }

  #passedNow(): ParamValues {
    return { [`column:${DEDUPE_WINDOW_COLUMNS.queueTable}`]: this.#queueTable, now: new Date() };
  }

  async #deleteBatch(statement: BoundStatement): Promise<number> {
    if (this.#dialect.name !== 'mysql') return (await this.#driver.execute(statement)).affectedRows;
    const session = this.#dialect.session;
    // READ COMMITTED: InnoDB then keeps no lock on the live windows the delete reads past, which a publish may be opening.
    const transaction = { begin: session.begin({ isolation: 'read committed' }), commit: session.commit(), rollback: session.rollback() };
    return withTransaction(this.#driver, transaction, async (_, connection) => (await connection.execute(statement)).affectedRows);
  }
}
