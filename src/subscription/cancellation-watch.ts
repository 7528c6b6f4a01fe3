import type { CancellationRecordStatements, CancellationsTable } from '../dialect/cancellation-statements.js';
import { CANCELLATION_COLUMNS } from '../dialect/cancellation-statements.js';
import type { Driver } from '../driver/driver.js';
import { powerOfTwoAtLeast } from '../internal/power-of-two.js';
import { bindRepeated, bindStatement, type BoundStatement } from '../statement.js';
import type { DeliveryCancellations } from './delivery-runner.js';

/** Ids a record read names at most: a padded list of placeholders stays one of a few texts. */
const IDS_PER_READ = 128;

/** The cancellations table as a broker hands it to its subscriptions. */
export interface CancellationRecords {
  readonly table: CancellationsTable;
  readonly statements: CancellationRecordStatements;
}

export interface CancellationWatchOptions {
  readonly driver: Driver;
  readonly records: CancellationRecords;
  /** The queue table's qualified name, as `broker.cancel` records it. */
  readonly queueTable: string;
  readonly pollIntervalMs: number;
  /** The deliveries in work whose settlement has not begun, and how to cancel one. */
  readonly runner: { inWorkIds(): string[]; cancel(id: string): boolean; isCancelled(id: string): boolean };
  /** A lease lost for another reason than a cancel: counted as `leasesLost`. */
  readonly onLeaseLost: (id: string) => void;
  readonly onError: (error: unknown, phase: string) => void;
}

/**
 * How a subscription hears that a message it has in work was cancelled by `broker.cancel`,
 * possibly in another process, which recorded it in the cancellations table.
 *
 * - Every form: `watch()` reads the records of the ids in work once per poll interval, one
 *   statement per 128 ids, and only while something is in work. A row lock or key lock keeps
 *   the row, so the record is all the canceller could write.
 * - Lease form: the canceller also removed the row, so a renewal or the settlement may find it
 *   gone first; `leaseLost` then reads the record to tell a cancel from a lease taken by another
 *   claim. Renewals come every half lease, so the poll is what makes a cancel reach the handler
 *   within a poll interval.
 *
 * Either way the delivery runner aborts the handler's signal and settles the message as
 * cancelled; `settledAsCancelled` then deletes the record.
 */
export class CancellationWatch implements DeliveryCancellations {
  readonly #options: CancellationWatchOptions;
  #timer: NodeJS.Timeout | undefined;
  #isStopped = false;
  /**
   * Record reads per id, shared by the lost lease and the settlement that both ask about one
   * row, and kept once they found a record until the cancel settled: the record is deleted then,
   * and a later read would call the cancel a lost lease.
   */
  readonly #checks = new Map<string, Promise<boolean>>();

  constructor(options: CancellationWatchOptions) {
    this.#options = options;
  }

  /** Starts reading the records of the ids in work every poll interval. */
  watch(): void {
    this.#schedule();
  }

  stop(): void {
    this.#isStopped = true;
    clearTimeout(this.#timer);
  }

  /** A lease was found lost: a cancel when the row has a record, so its handler is told. */
  leaseLost(id: string): void {
    // This broker already knew (its own cancel, or an earlier read): the settlement is the cancel's.
    if (this.#options.runner.isCancelled(id)) return;
    void this.wasCancelled(id).then((isCancelled) => {
      if (isCancelled) this.#options.runner.cancel(id);
      else this.#options.onLeaseLost(id);
    });
  }

  wasCancelled(id: string): Promise<boolean> {
    let check = this.#checks.get(id);
    if (check === undefined) {
      check = this.#check(id);
      this.#checks.set(id, check);
      void check.then((isCancelled) => {
        if (!isCancelled) this.#checks.delete(id);
      });
    }
    return check;
  }

  async #check(id: string): Promise<boolean> {
    try {
      return (await this.#find([id])).includes(id);
    } catch (error) {
      this.#options.onError(error, 'cancellation check');
      return false;
    }
  }

  settledAsCancelled(id: string): void {
    this.#checks.delete(id);
    const { driver, records, queueTable } = this.#options;
    const statement = bindStatement(records.statements.remove(records.table), {
      [`column:${CANCELLATION_COLUMNS.queueTable}`]: queueTable,
      [`column:${CANCELLATION_COLUMNS.rowId}`]: id,
    });
    driver.execute(statement).catch((error: unknown) => this.#options.onError(error, 'cancellation record removal'));
  }

  #schedule(): void {
    if (this.#isStopped) return;
    this.#timer = setTimeout(() => {
      void this.#round().finally(() => this.#schedule());
    }, this.#options.pollIntervalMs);
  }

  async #round(): Promise<void> {
    const ids = this.#options.runner.inWorkIds();
    if (ids.length === 0) return;
    // No connection free for work (row lock deliveries hold theirs): waiting for one could end in
    // a pool timeout and would delay claims; the next round reads once one is free.
    if (this.#options.driver.stats().spare === 0) return;
    try {
      for (const id of await this.#find(ids)) this.#options.runner.cancel(id);
    } catch (error) {
      this.#options.onError(error, 'cancellation watch');
    }
  }

  /** The ids among `ids` that have a record. */
  async #find(ids: readonly string[]): Promise<string[]> {
    const found: string[] = [];
    for (let start = 0; start < ids.length; start += IDS_PER_READ) {
      const result = await this.#options.driver.execute(this.#bindFind(ids.slice(start, start + IDS_PER_READ)));
      for (const row of result.rows) found.push(String(row[CANCELLATION_COLUMNS.rowId]));
    }
    return found;
  }

  #bindFind(ids: readonly string[]): BoundStatement {
    const { records, queueTable } = this.#options;
    const shared = { [`column:${CANCELLATION_COLUMNS.queueTable}`]: queueTable };
    if (records.statements.idParams === 'array') {
      return bindStatement(records.statements.find(records.table, ids.length), { ...shared, ids });
    }
    const statement = records.statements.find(records.table, powerOfTwoAtLeast(ids.length));
    return bindRepeated(statement, ids.map((id) => ({ id })), shared, 'id');
  }
}
