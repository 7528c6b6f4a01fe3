import type { DdlDialectName, Queue } from '../definition/define-table.js';
import {
  CANCELLATION_COLUMNS,
  createCancellationRecordStatements,
  createCancelRowStatements,
  DEFAULT_CANCELLATIONS_TABLE,
  parseCancellationsTable,
  type CancelRowStatements,
} from '../dialect/cancellation-statements.js';
import type { Dialect } from '../dialect/dialect.js';
import type { NotifyStatements } from '../dialect/notify.js';
import { withConnection, withTransaction, type TransactionStatements } from '../driver/connection-scope.js';
import type { Connection, Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { UnsupportedError } from '../errors.js';
import { bindStatement, type ParamValues, type Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import type { CancellationRecords } from '../subscription/cancellation-watch.js';

/**
 * The cancellations table's `CREATE TABLE IF NOT EXISTS`, for a migration of the service's own:
 * a broker with subscriptions creates it at start when missing, and `cancel` before its first
 * record, so running this first is optional. `table` is `name` or `schema.name` (default
 * `tablequeue_cancellations`, the broker's default `cancellationsTable`).
 */
export function createCancellationsTableSql(database: DdlDialectName, table: string = DEFAULT_CANCELLATIONS_TABLE): string {
  return createCancellationRecordStatements(database).createTable(parseCancellationsTable(table, database));
}

/**
 * What `broker.cancel` found: `waiting` (removed before any handler saw it), `inWork` (a handler
 * runs it: its signal aborts and it settles as cancelled, never retried), or `gone` (no such
 * unfinished message in the queue: finished, dead-lettered, or never there).
 */
export interface CancelResult {
  readonly status: 'waiting' | 'inWork' | 'gone';
}

export interface MessageCancellerOptions {
  readonly driver: Driver;
  readonly dialect: Dialect;
  /** The cancellations table, `name` or `schema.name`. */
  readonly table: string;
  /**
   * Postgres: a cancel of a message in work also notifies `CANCELLATIONS_CHANNEL`, so a listening
   * broker that runs it hears at once rather than at its next poll.
   */
  readonly notify?: NotifyStatements | undefined;
  /** A notification that failed: the cancel took effect, and the brokers still read it at their next poll. */
  readonly onNotifyError?: (error: unknown) => void;
}

/**
 * The Postgres channel a cancel of a message in work notifies, whatever the cancellations table is
 * called. The payload is the JSON array `[queue table, row id]`.
 */
export const CANCELLATIONS_CHANNEL = 'tablequeue_cancellations';

/** The queue table and row id of a cancellation notice; undefined for a payload some other program sent. */
export function parseCancellationNotice(payload: string): { readonly queueTable: string; readonly id: string } | undefined {
  try {
    const value: unknown = JSON.parse(payload);
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === 'string' && typeof value[1] === 'string') {
      return { queueTable: value[0], id: value[1] };
    }
  } catch {
    // Not ours: the channel is open to anyone who can NOTIFY.
  }
  return undefined;
}

/**
 * Cancels messages by id. A waiting row is removed by statements that match only a waiting row,
 * so a claim and a cancel never both take it. A row in work is recorded in the cancellations
 * table for the broker that runs it (subscription/cancellation-watch.ts), and a lease row is also
 * removed at once, in the same transaction, so its holder's renewals and settlements find
 * nothing and no retry can bring it back.
 */
export class MessageCanceller {
  readonly records: CancellationRecords;
  readonly #options: MessageCancellerOptions;
  readonly #rows: CancelRowStatements;
  #isTableCreated = false;

  constructor(options: MessageCancellerOptions) {
    this.#options = options;
    const database = options.dialect.name;
    this.records = {
      table: parseCancellationsTable(options.table, database),
      statements: createCancellationRecordStatements(database),
    };
    this.#rows = createCancelRowStatements(database);
  }

  /**
   * `CREATE TABLE IF NOT EXISTS`: at start when the broker has subscriptions, and before the first
   * cancel; another broker creating it at the same moment counts as created.
   */
  async createTable(): Promise<void> {
    await createSideTable(this.#options.driver, 'cancellations.createTable', this.records.statements.createTable(this.records.table));
    this.#isTableCreated = true;
  }

  cancel(queue: Queue<unknown>, id: string): Promise<CancelResult> {
    return this.cancelIn(queue.table.spec, queue.group, id);
  }

  /** `cancel` by the table's roles and the queue's group (undefined on a table without groups): the CLI's. */
  async cancelIn(spec: TableSpec, group: string | undefined, id: string): Promise<CancelResult> {
    if (spec.form === 'advisory') {
      throw new UnsupportedError({
        database: this.#options.dialect.name,
        feature: 'cancel',
        message: `cancel of table "${spec.qualifiedName}": the advisory lock form cannot tell a row in work from a waiting row behind it with the same key, so cancel is built for the lease and row lock forms; declare lockedUntil for a lease table`,
      });
    }
    if (!this.#isTableCreated) await this.createTable();
    const now = new Date();
    const values: ParamValues = {
      id,
      group,
      now,
      leaseNow: now,
      [`column:${CANCELLATION_COLUMNS.queueTable}`]: spec.qualifiedName,
      [`column:${CANCELLATION_COLUMNS.rowId}`]: id,
    };
    const status = spec.form === 'lease' ? await this.#cancelLease(spec, values) : await this.#cancelRowLock(spec, values);
    if (status === 'inWork') await this.#announce(spec.qualifiedName, id);
    return { status };
  }

  /** After the record committed, so a broker that hears it finds the record too. */
  async #announce(queueTable: string, id: string): Promise<void> {
    const { driver, notify, onNotifyError } = this.#options;
    if (notify === undefined) return;
    const payload = JSON.stringify([queueTable, id]);
    // Too long to send: the brokers read the record at their next poll.
    if (Buffer.byteLength(payload) > notify.maxPayloadBytes) return;
    try {
      await driver.execute(bindStatement(notify.notify(), { channel: CANCELLATIONS_CHANNEL, group: payload }));
    } catch (error) {
      onNotifyError?.(error);
    }
  }

  /**
   * A waiting lease row goes in one statement that requires no live lease. Otherwise the record
   * and the removal commit together: the holder that finds its row gone finds the record too.
   */
  async #cancelLease(spec: TableSpec, values: ParamValues): Promise<CancelResult['status']> {
    const { driver, dialect } = this.#options;
    if ((await driver.execute(bindStatement(this.#rows.removeWaiting(spec), values))).affectedRows > 0) return 'waiting';
    return withTransaction(driver, this.#transactionStatements(dialect), async (transaction, connection) => {
      await connection.execute(bindStatement(this.records.statements.record(this.records.table), values));
      if ((await connection.execute(bindStatement(this.#rows.removeInWork(spec), values))).affectedRows > 0) return 'inWork';
      await transaction.rollBack();
      return 'gone';
    });
  }

  /**
   * Row lock form: a claim's transaction holds the row it took, so a row this transaction can
   * lock without waiting is waiting, and is removed here. A row that exists but cannot be
   * locked is in work (or being claimed this instant), and only its record can be written.
   */
  async #cancelRowLock(spec: TableSpec, values: ParamValues): Promise<CancelResult['status']> {
    const { driver, dialect } = this.#options;
    const status = await withTransaction(driver, this.#transactionStatements(dialect), async (_transaction, connection) => {
      if ((await this.#rowsOf(connection, this.#rows.lockWaiting(spec), values)) > 0) {
        await connection.execute(bindStatement(this.#rows.removeLocked(spec), values));
        return 'waiting' as const;
      }
      return (await this.#rowsOf(connection, this.#rows.exists(spec), values)) > 0 ? ('inWork' as const) : ('gone' as const);
    });
    if (status !== 'inWork') return status;
    await withConnection(driver, (connection) => connection.execute(bindStatement(this.records.statements.record(this.records.table), values)));
    return 'inWork';
  }

  async #rowsOf(connection: Connection, statement: Statement, values: ParamValues): Promise<number> {
    return (await connection.execute(bindStatement(statement, values))).rows.length;
  }

  /** SQLite: BEGIN IMMEDIATE, so the transaction never meets the write lock halfway. */
  #transactionStatements(dialect: Dialect): TransactionStatements {
    return { begin: dialect.session.begin({ sqliteBegin: 'immediate' }), commit: dialect.session.commit(), rollback: dialect.session.rollback() };
  }
}
