import { Queue, QueueTable } from '../definition/define-table.js';
import type { NotifyStatements } from '../dialect/notify.js';
import {
  createQueueControlStatements,
  DEFAULT_QUEUE_CONTROLS_TABLE,
  parseQueueControlsTable,
  PAUSED_MS_AGO_COLUMN,
  QUEUE_CONTROL_COLUMNS,
  WHOLE_TABLE_QUEUE_NAME,
  type QueueControlDatabase,
  type QueueControlStatements,
  type QueueControlsTable,
} from '../dialect/queue-control-statements.js';
import type { Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { DeclarationError, SchemaError } from '../errors.js';
import { bindStatement } from '../statement.js';

/**
 * The Postgres channel pause and resume notify, whatever the controls table is called: a channel
 * is one identifier of at most 63 bytes, which a qualified table name may exceed. A broker that
 * reads another controls table only reads its own state once more when it hears one.
 */
export const QUEUE_CONTROLS_CHANNEL = 'tablequeue_queue_controls';

/** Which row of the controls table a pause or resume writes: a queue, or a whole table. */
export interface QueueControlKey {
  /** The queue table's qualified name, as declared. */
  readonly queueTable: string;
  /** The queue's group; empty text for a table without groups, or for every queue of a table. */
  readonly queueName: string;
}

/** A paused queue, as `tablequeue stats` and the dashboard show it. */
export interface PausedQueue extends QueueControlKey {
  /** How long ago it was paused, by the database's clock. */
  readonly pausedMsAgo: number;
}

/**
 * The row of a queue (its group, or the whole table when it has none) or of a whole table
 * (every queue of it, grouped or not).
 */
export function queueControlKeyOf(target: Queue<unknown> | QueueTable, what: string): QueueControlKey {
  if (target instanceof Queue) {
    return { queueTable: target.table.spec.qualifiedName, queueName: target.group ?? WHOLE_TABLE_QUEUE_NAME };
  }
  if (target instanceof QueueTable) return { queueTable: target.spec.qualifiedName, queueName: WHOLE_TABLE_QUEUE_NAME };
  throw new DeclarationError(`${what} needs a queue (table.queue("name")) or a table from defineTable`);
}

/** `schema.table/group`, the table alone for a whole table's row: for messages. */
export function queueControlLabel(key: QueueControlKey): string {
  return key.queueName === WHOLE_TABLE_QUEUE_NAME ? key.queueTable : `${key.queueTable}/${key.queueName}`;
}

/** What a notification on QUEUE_CONTROLS_CHANNEL carries: the key, or undefined when it is not one of ours. */
export function parseQueueControlPayload(payload: string): QueueControlKey | undefined {
  try {
    const parsed: unknown = JSON.parse(payload);
    if (Array.isArray(parsed) && parsed.length === 2 && typeof parsed[0] === 'string' && typeof parsed[1] === 'string') {
      return { queueTable: parsed[0], queueName: parsed[1] };
    }
  } catch {
    // Another program's notification on the channel: not ours to act on.
  }
  return undefined;
}

export interface QueueControlsOptions {
  readonly driver: Driver;
  readonly database: QueueControlDatabase;
  /** `name` or `schema.name`; default `tablequeue_queue_controls`. */
  readonly table?: string;
  /** Postgres: pause and resume notify QUEUE_CONTROLS_CHANNEL, so listening brokers read at once. */
  readonly notify?: NotifyStatements | undefined;
}

/**
 * Reads and writes the queue controls table (dialect/queue-control-statements.ts) for the
 * broker, the CLI and the dashboard. A queue without a row runs.
 */
export class QueueControls {
  readonly tableName: string;
  readonly #driver: Driver;
  readonly #table: QueueControlsTable;
  readonly #statements: QueueControlStatements;
  readonly #notify: NotifyStatements | undefined;
  #created: Promise<void> | undefined;

  constructor(options: QueueControlsOptions) {
    this.tableName = options.table ?? DEFAULT_QUEUE_CONTROLS_TABLE;
    this.#driver = options.driver;
    this.#table = parseQueueControlsTable(this.tableName, options.database);
    this.#statements = createQueueControlStatements(options.database);
    this.#notify = options.notify;
  }

  /**
   * `CREATE TABLE IF NOT EXISTS`, once per instance while it succeeds; another broker creating it
   * at the same moment counts as created. A failure is a SchemaError that says how to create the
   * table by hand.
   */
  createTable(): Promise<void> {
    this.#created ??= this.#createTable().catch((error: unknown) => {
      this.#created = undefined;
      throw error;
    });
    return this.#created;
  }

  /** Pauses `key`'s queue (creating the table first), then notifies listening brokers. */
  async pause(key: QueueControlKey): Promise<void> {
    await this.#write(key, this.#statements.pause(this.#table));
  }

  /** Resumes `key`'s queue (creating the table first), then notifies listening brokers. */
  async resume(key: QueueControlKey): Promise<void> {
    await this.#write(key, this.#statements.resume(this.#table));
  }

  /**
   * Whether the queue is paused: its own row or its table's whole-table row. Throws when the
   * table cannot be read; the subscriptions' watch decides what that means for claims.
   */
  async isPaused(key: QueueControlKey): Promise<boolean> {
    return (await this.pausedBy(key)).length > 0;
  }

  /** Which rows pause the queue: its own queue name, and empty text for its table's whole-table row. */
  async pausedBy(key: QueueControlKey): Promise<string[]> {
    const result = await this.#driver.execute(bindStatement(this.#statements.pausedRows(this.#table), keyValues(key)));
    return result.rows.map((row) => textOf(row[QUEUE_CONTROL_COLUMNS.queueName]));
  }

  /** Every paused queue, by table and queue name. Throws when the table cannot be read. */
  async listPaused(): Promise<PausedQueue[]> {
    const result = await this.#driver.execute(bindStatement(this.#statements.listPaused(this.#table), {}));
    return result.rows.map((row) => ({
      queueTable: textOf(row[QUEUE_CONTROL_COLUMNS.queueTable]),
      queueName: textOf(row[QUEUE_CONTROL_COLUMNS.queueName]),
      pausedMsAgo: Math.max(0, Number(row[PAUSED_MS_AGO_COLUMN])),
    }));
  }

  async #createTable(): Promise<void> {
    const name = 'queueControl.createTable';
    try {
      await createSideTable(this.#driver, name, this.#statements.createTable(this.#table));
    } catch (error) {
      throw new SchemaError({
        table: this.tableName,
        statement: name,
        message: `pause and resume keep their state in table "${this.tableName}", which could not be created (${messageOf(error)}); create it once with the DDL of createQueueControlsTableSql(database, "${this.tableName}")`,
        cause: error,
      });
    }
  }

  async #write(key: QueueControlKey, statement: ReturnType<QueueControlStatements['pause']>): Promise<void> {
    await this.createTable();
    await this.#driver.execute(bindStatement(statement, keyValues(key)));
    const notify = this.#notify;
    if (notify !== undefined) {
      await this.#driver.execute(
        bindStatement(notify.notify(), { channel: QUEUE_CONTROLS_CHANNEL, group: JSON.stringify([key.queueTable, key.queueName]) }),
      );
    }
  }
}

/**
 * The `CREATE TABLE IF NOT EXISTS` of the queue controls table, for a migration: a broker with
 * subscriptions creates it at start, and `pause` before its first write, which needs the right to
 * create tables.
 */
export function createQueueControlsTableSql(
  database: QueueControlDatabase,
  table: string = DEFAULT_QUEUE_CONTROLS_TABLE,
): string {
  return createQueueControlStatements(database).createTable(parseQueueControlsTable(table, database));
}

function keyValues(key: QueueControlKey): Record<string, unknown> {
  return { [`column:${QUEUE_CONTROL_COLUMNS.queueTable}`]: key.queueTable, [`column:${QUEUE_CONTROL_COLUMNS.queueName}`]: key.queueName };
}

/** MySQL's binary key columns come back as bytes; the names were written as UTF-8. */
function textOf(value: unknown): string {
  return value instanceof Uint8Array ? Buffer.from(value).toString('utf8') : String(value);
}

function messageOf(error: unknown): string {
  if (error instanceof Error && error.cause instanceof Error) return error.cause.message;
  return error instanceof Error ? error.message : String(error);
}
