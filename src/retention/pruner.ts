import type { Dialect } from '../dialect/dialect.js';
import { createRetentionStatements, PRUNE_COUNT_COLUMN, type PruneBatch, type PruneTarget, type RetentionStatements } from '../dialect/retention-statements.js';
import { withTransaction } from '../driver/connection-scope.js';
import type { Driver } from '../driver/driver.js';
import { abortableSleep } from '../internal/abortable-sleep.js';
import { powerOfTwoAtLeast } from '../internal/power-of-two.js';
import { bindRepeated, bindStatement, type ParamValues } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

/** How a run of batches goes, whatever the batches delete. */
export interface BatchRun {
  readonly batchSize: number;
  readonly pauseMs: number;
  /** Ends the run between two batches. */
  readonly signal?: AbortSignal | undefined;
  /** Asked before every batch but the first; false ends the run (the maintenance lease was lost). */
  readonly beforeBatch?: () => Promise<boolean>;
  /** After each batch that deleted rows, with their count. */
  readonly onDeleted?: (rowCount: number) => void;
}

export interface PruneRun extends BatchRun {
  readonly target: PruneTarget;
  /** Rows older than this many milliseconds go. */
  readonly olderThanMs: number;
}

/**
 * Runs `deleteBatch` until a batch deletes fewer rows than `batchSize` or the run is told to end,
 * pausing `pauseMs` between two; the rows deleted.
 */
export async function deleteInBatches(run: BatchRun, deleteBatch: () => Promise<number>): Promise<number> {
  let deleted = 0;
  const isEnded = (): boolean => run.signal?.aborted === true;
  for (let index = 0; ; index += 1) {
    if (isEnded()) return deleted;
    if (index > 0) {
      await abortableSleep(run.pauseMs, run.signal);
      if (isEnded()) return deleted;
      if (run.beforeBatch !== undefined && !(await run.beforeBatch())) return deleted;
    }
    const rowCount = await deleteBatch();
    deleted += rowCount;
    if (rowCount > 0) run.onDeleted?.(rowCount);
    if (rowCount < run.batchSize) return deleted;
  }
}

/**
 * Deletes one table's old rows in batches: each batch its own short transaction (one statement,
 * or on MySQL and MariaDB the lock of its ids and their delete), a pause between two, until a
 * batch comes back short. Shared by the broker's retention and `tablequeue prune`.
 */
export class Pruner {
  readonly #driver: Driver;
  readonly #dialect: Dialect;
  readonly #spec: TableSpec;
  readonly #statements: RetentionStatements;

  constructor(parts: { driver: Driver; dialect: Dialect; spec: TableSpec }) {
    this.#driver = parts.driver;
    this.#dialect = parts.dialect;
    this.#spec = parts.spec;
    this.#statements = createRetentionStatements(parts.dialect.name);
  }

  /** Deletes until a batch deletes fewer rows than `batchSize`, or the run is told to end; the rows deleted. */
  prune(run: PruneRun): Promise<number> {
    const batch = this.#statements.pruneBatch(this.#spec, run.target, run.batchSize);
    // The cutoff moves with the clock: a run of many batches takes what aged meanwhile too.
    return deleteInBatches(run, () => this.#deleteBatch(batch, this.#values(run.target, run.olderThanMs)));
  }

  /** How many rows a prune would delete now. */
  async count(target: PruneTarget, olderThanMs: number): Promise<number> {
    const result = await this.#driver.execute(bindStatement(this.#statements.count(this.#spec, target), this.#values(target, olderThanMs)));
    return Number(result.rows[0]?.[PRUNE_COUNT_COLUMN] ?? 0);
  }

  #values(target: PruneTarget, olderThanMs: number): ParamValues {
    const now = new Date();
    return {
      olderThan: new Date(now.getTime() - olderThanMs),
      cutoffDelayMicroseconds: -olderThanMs * 1000,
      now,
      deadLetterGroup: target.kind === 'deadLetter' && target.destination.kind === 'group' ? target.destination.group : undefined,
    };
  }

  async #deleteBatch(batch: PruneBatch, values: ParamValues): Promise<number> {
    if (batch.shape === 'oneStatement') {
      return (await this.#driver.execute(bindStatement(batch.delete, values))).affectedRows;
    }
    const session = this.#dialect.session;
    // READ COMMITTED: InnoDB then keeps locks only on the rows the select took, not on those it passed over.
    const transaction = { begin: session.begin({ isolation: 'read committed' }), commit: session.commit(), rollback: session.rollback() };
    return withTransaction(this.#driver, transaction, async (_, connection) => {
      const locked = await connection.execute(bindStatement(batch.lock, values));
      if (locked.rows.length === 0) return 0;
      const rows = locked.rows.map((row) => ({ id: row[this.#spec.id.column] }));
      const remove = batch.deleteIds(powerOfTwoAtLeast(rows.length));
      return (await connection.execute(bindRepeated(remove, rows, {}, 'id'))).affectedRows;
    });
  }
}
