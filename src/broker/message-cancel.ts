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
import { ADVISORY_CONFIRMED_COLUMN, ADVISORY_KEY_COLUMN } from '../dialect/advisory-statements.js';
import { inProcessLocks } from '../claim/in-process-lock-registry.js';
import { StatementError, UnsupportedError } from '../errors.js';
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
 * PostgreSQL refuses an id its id column's type cannot hold (`abc` or `1e40` for a bigint, a
 * malformed uuid), where MySQL, MariaDB and SQLite compare and find no row: no such message can
 * exist, so on every database the cancel answers `gone`. The id is the only text these
 * statements cast: SQLSTATE 22P02 (invalid text representation) and 22003 (out of range).
 */
function isIdOutsideColumnType(error: unknown): boolean {
  return error instanceof StatementError && (error.sqlState === '22P02' || error.sqlState === '22003');
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
    if (spec.form === 'advisory') refuseSharedKeys(spec, this.#options.dialect);
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
    let status: CancelResult['status'];
    try {
      status =
        spec.form === 'lease'
          ? await this.#cancelLease(spec, values)
          : spec.form === 'rowLock'
            ? await this.#cancelRowLock(spec, values)
            : await this.#cancelAdvisory(spec, values);
    } catch (error) {
      if (!isIdOutsideColumnType(error)) throw error;
      return { status: 'gone' };
    }
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

  /**
   * Advisory lock form: the row's key (which names the row alone, see `refuseSharedKeys`) is
   * locked without waiting, as a claim would. Taken: no delivery has the row, which is removed
   * before the key is let go, so no claim can take it meanwhile. Held: a delivery has this row in
   * work, and only its record can be written.
   */
  async #cancelAdvisory(spec: TableSpec, values: ParamValues): Promise<CancelResult['status']> {
    const { driver, dialect } = this.#options;
    const status = await withConnection(driver, async (connection) => {
      const key = (await connection.execute(bindStatement(dialect.advisory.keyOf(spec), values))).rows[0]?.[ADVISORY_KEY_COLUMN];
      if (key === undefined || key === null) return 'gone' as const;
      const keyText = String(key);
      const removeIfTaken = async (isTaken: boolean) => {
        if (!isTaken) return 'inWork' as const;
        const removed = await connection.execute(bindStatement(this.#rows.removeLocked(spec), values));
        return removed.affectedRows > 0 ? ('waiting' as const) : ('gone' as const);
      };
      if (!dialect.capabilities.supportsSessionLocks) {
        // SQLite: the keys this process's deliveries hold (a cancel from another process cannot see them).
        const database = driver.databaseIdentity ?? driver;
        const isTaken = inProcessLocks.tryLock(database, keyText);
        try {
          return await removeIfTaken(isTaken);
        } finally {
          if (isTaken) inProcessLocks.unlock(database, keyText);
        }
      }
      const confirmed = (statement: Statement) =>
        connection.execute(bindStatement(statement, { key: keyText })).then((result) => Number(result.rows[0]?.[ADVISORY_CONFIRMED_COLUMN]) === 1);
      const isTaken = await confirmed(dialect.advisory.lock());
      // An unlock that throws destroys the connection (withConnection), and the server lets go of
      // the session's keys as it ends: no key is left held either way.
      const found = await removeIfTaken(isTaken);
      if (isTaken) await confirmed(dialect.advisory.unlock());
      return found;
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

/**
 * A held key says that some row with that key is in work. Only a template that names the id
 * column gives each row a key of its own, so that a held key means this row is in work; with a
 * key shared by rows (`customer-{customer}`) the row may be waiting behind another of its key,
 * and cancel could neither remove it safely nor tell its holder.
 */
function refuseSharedKeys(spec: TableSpec, dialect: Dialect): void {
  const parts = spec.advisoryLock ?? [];
  if (parts.some((part) => 'column' in part && part.column === spec.id.column)) return;
  throw new UnsupportedError({
    database: dialect.name,
    feature: 'cancel on advisory keys shared by rows',
    message: `cancel of table "${spec.qualifiedName}": its advisory key template does not name the id column "${spec.id.column}", so rows share keys and a held key cannot say which of them is in work; cancel works on advisory tables whose template names the id (such as "job-{${spec.id.column}}"), and on lease and row lock tables`,
  });
}
