import type { Queue } from '../definition/define-table.js';
import {
  CONTROL_READ_COLUMNS,
  CONTROL_READ_KINDS,
  CONTROL_READ_PARAMS,
  createControlReadStatements,
  type ControlReadDatabase,
  type ControlReadStatements,
  type ControlReadTables,
} from '../dialect/control-read-statements.js';
import { DEFAULT_QUEUE_CONTROLS_TABLE, parseQueueControlsTable, WHOLE_TABLE_QUEUE_NAME } from '../dialect/queue-control-statements.js';
import type { CancellationRecords } from '../subscription/cancellation-watch.js';
import type { Driver } from '../driver/driver.js';
import { powerOfTwoAtLeast } from '../internal/power-of-two.js';
import { TestSignal } from '../internal/test-signal.js';
import { bindPositional, type BoundStatement } from '../statement.js';

/** Rows in work one statement names at most, as the cancellation watch's own reads did. */
const IN_WORK_PER_READ = 128;

/** A table's qualified name and a queue name or row id: one pair of a list the read binds. */
export type ControlReadPair = readonly [queueTable: string, item: string];

/** What one read found: paused rows as `table/queue name` (the table alone for a whole table's), cancelled ids, statements sent. */
export interface ControlReadFound {
  readonly paused: readonly string[];
  readonly cancelled: readonly string[];
  readonly statements: number;
}

/** What a test reaches in a broker's read (not exported by the package). */
export interface ControlReadTestHooks {
  /** A read ended and told the subscriptions what it found. */
  readonly read: TestSignal<ControlReadFound>;
}

/** What the broker's read needs of a subscription. */
export interface ControlReadSubscription {
  readonly queue: Queue<unknown>;
  inWorkIds(): string[];
  cancelInWork(id: string): void;
  observePaused(isPaused: boolean, readStartedAt: number): void;
}

export interface BrokerControlReadOptions {
  readonly driver: Driver;
  readonly statements: ControlReadStatements;
  readonly tables: ControlReadTables;
  readonly subscriptions: readonly ControlReadSubscription[];
  /** The shortest poll interval among the subscriptions: how often the read runs. */
  readonly pollIntervalMs: number;
  /** The first failed read since the last good one (a subscription that asked hears of it too). */
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
}

/**
 * A broker's one read per poll interval of the pause state of every queue it subscribes to and
 * of the cancellations among every message it has in work: one statement where each subscription
 * read both apart, two statements per subscription per interval (docs/benchmarks.md, "Pause and
 * cancel reads"). Each read tells every subscription whether its queue is paused (fresh from
 * when the read began) and cancels the handlers of rows with a record.
 *
 * A subscription's claim loop still asks before each claim; when its answer is stale (a
 * notification, its interval over, or a read that failed) it takes the read running if that one
 * began after the subscription's last notification, else the next read, which starts at once or
 * right after the one running (that one may have begun before the change it must see). Every read,
 * asked for or timed, puts the timer one interval after its start. A timed read is skipped while
 * the pool has no connection free for work (row lock deliveries hold theirs), as claims would wait.
 */
export class BrokerControlRead {
  readonly testHooks: ControlReadTestHooks = { read: new TestSignal() };
  readonly #options: BrokerControlReadOptions;
  readonly #queueKeys: ControlReadPair[];
  #timer: NodeJS.Timeout | undefined;
  #isStopped = true;
  #running: Promise<ReadonlySet<string>> | undefined;
  /** When the running read began, on performance.now(). */
  #runningSince = 0;
  #queued: Promise<ReadonlySet<string>> | undefined;
  #hasReportedFailure = false;

  constructor(options: BrokerControlReadOptions) {
    this.#options = options;
    this.#queueKeys = queueKeysOf(options.subscriptions.map((subscription) => subscription.queue));
  }

  start(): void {
    this.#isStopped = false;
    this.#schedule();
  }

  stop(): void {
    this.#isStopped = true;
    clearTimeout(this.#timer);
  }

  /**
   * Whether `queue` is paused, by the read running when it began after `refreshedAt` (its
   * subscription's last notification, on performance.now()), else by a read that begins now or
   * right after the one running; may throw.
   */
  async readPaused(queue: Queue<unknown>, refreshedAt: number): Promise<boolean> {
    const running = this.#running;
    if (running !== undefined && this.#runningSince > refreshedAt) return isPausedIn(await running, queue);
    return isPausedIn(await this.#nextRead(), queue);
  }

  #nextRead(): Promise<ReadonlySet<string>> {
    const running = this.#running;
    if (running === undefined) return this.#begin();
    this.#queued ??= running
      .catch(() => undefined)
      .then(() => {
        this.#queued = undefined;
        return this.#begin();
      });
    return this.#queued;
  }

  #begin(): Promise<ReadonlySet<string>> {
    this.#schedule();
    this.#runningSince = performance.now();
    const read = this.#read();
    this.#running = read;
    void read
      .then(
        () => (this.#hasReportedFailure = false),
        (error: unknown) => {
          if (this.#isStopped || this.#hasReportedFailure) return;
          this.#hasReportedFailure = true;
          this.#options.onError(error, { phase: 'pause and cancellation read' });
        },
      )
      .finally(() => {
        if (this.#running === read) this.#running = undefined;
      });
    return read;
  }

  #schedule(): void {
    clearTimeout(this.#timer);
    if (this.#isStopped) return;
    this.#timer = setTimeout(() => {
      if (this.#running !== undefined || this.#options.driver.stats().spare === 0) this.#schedule();
      else void this.#begin().catch(() => undefined);
    }, this.#options.pollIntervalMs);
  }

  /** One statement, or one more per 128 rows in work beyond the first 128; the paused keys found. */
  async #read(): Promise<ReadonlySet<string>> {
    const startedAt = performance.now();
    const { driver, statements, tables, subscriptions } = this.#options;
    const inWork = inWorkPairsOf(subscriptions);
    const pausedRows: ControlReadPair[] = [];
    const cancelled: ControlReadPair[] = [];
    let statementsSent = 0;
    let start = 0;
    do {
      const chunk = inWork.slice(start, start + IN_WORK_PER_READ);
      const queueKeys = start === 0 ? this.#queueKeys : [];
      if (queueKeys.length === 0 && chunk.length === 0) break;
      const result = await driver.execute(bindControlRead(statements, tables, queueKeys, chunk));
      statementsSent += 1;
      for (const row of result.rows) {
        const pair: ControlReadPair = [textOf(row[CONTROL_READ_COLUMNS.queueTable]), textOf(row[CONTROL_READ_COLUMNS.item])];
        if (textOf(row[CONTROL_READ_COLUMNS.kind]) === CONTROL_READ_KINDS.paused) pausedRows.push(pair);
        else cancelled.push(pair);
      }
      start += IN_WORK_PER_READ;
    } while (start < inWork.length);
    const paused = new Set(pausedRows.map(keyOf));
    for (const subscription of subscriptions) subscription.observePaused(isPausedIn(paused, subscription.queue), startedAt);
    for (const [queueTable, id] of cancelled) {
      for (const subscription of subscriptions) {
        if (subscription.queue.table.spec.qualifiedName === queueTable) subscription.cancelInWork(id);
      }
    }
    this.testHooks.read.emit({
      paused: pausedRows.map(([queueTable, queueName]) => (queueName === WHOLE_TABLE_QUEUE_NAME ? queueTable : `${queueTable}/${queueName}`)),
      cancelled: cancelled.map(([, id]) => id),
      statements: statementsSent,
    });
    return paused;
  }
}

/**
 * The broker's read of its subscriptions, where it can read both tables: undefined when either
 * could not be created at start, and each subscription then reads them apart, as before, so a
 * missing queue controls table never hides cancels, nor the other way round.
 */
export function openControlRead(options: {
  readonly driver: Driver;
  readonly database: ControlReadDatabase;
  readonly queueControlsTable: string | undefined;
  readonly hasQueueControlsTable: boolean;
  readonly cancellations: CancellationRecords | undefined;
  readonly subscriptions: readonly (ControlReadSubscription & { readonly pollIntervalMs: number })[];
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
}): BrokerControlRead | undefined {
  const { cancellations, subscriptions, database } = options;
  if (!options.hasQueueControlsTable || cancellations === undefined || subscriptions.length === 0) return undefined;
  return new BrokerControlRead({
    driver: options.driver,
    statements: createControlReadStatements(database),
    tables: {
      queueControls: parseQueueControlsTable(options.queueControlsTable ?? DEFAULT_QUEUE_CONTROLS_TABLE, database),
      cancellations: cancellations.table,
    },
    subscriptions,
    pollIntervalMs: Math.min(...subscriptions.map((subscription) => subscription.pollIntervalMs)),
    onError: options.onError,
  });
}

/**
 * The read's statement for these queue keys and rows in work, bound: Postgres binds four text
 * arrays; the others a pair of placeholders per key and per row, each list padded with its last
 * pair up to a power of two, so few texts are ever prepared.
 */
export function bindControlRead(
  statements: ControlReadStatements,
  tables: ControlReadTables,
  queueKeys: readonly ControlReadPair[],
  inWork: readonly ControlReadPair[],
): BoundStatement {
  const isArray = statements.listParams === 'array';
  const counts = {
    queueKeys: isArray || queueKeys.length === 0 ? queueKeys.length : powerOfTwoAtLeast(queueKeys.length),
    inWork: isArray || inWork.length === 0 ? inWork.length : powerOfTwoAtLeast(inWork.length),
  };
  const statement = statements.read(tables, counts);
  const lists: Record<string, { pairs: readonly ControlReadPair[]; part: 0 | 1 }> = {
    [CONTROL_READ_PARAMS.controlTable]: { pairs: queueKeys, part: 0 },
    [CONTROL_READ_PARAMS.controlName]: { pairs: queueKeys, part: 1 },
    [CONTROL_READ_PARAMS.cancelTable]: { pairs: inWork, part: 0 },
    [CONTROL_READ_PARAMS.cancelRowId]: { pairs: inWork, part: 1 },
  };
  const occurrences = new Map<string, number>();
  const values = statement.params.map((param) => {
    const list = lists[param];
    if (list === undefined) throw new TypeError(`statement "${statement.name}" has a parameter the control read does not bind: "${param}"`);
    if (isArray) return list.pairs.map((pair) => pair[list.part]);
    const occurrence = occurrences.get(param) ?? 0;
    occurrences.set(param, occurrence + 1);
    return (list.pairs[occurrence] ?? list.pairs[list.pairs.length - 1]!)[list.part];
  });
  return bindPositional(statement, values);
}

/** Each queue's own row and its table's whole-table row, once each. */
export function queueKeysOf(queues: readonly Queue<unknown>[]): ControlReadPair[] {
  const keys = new Map<string, ControlReadPair>();
  for (const queue of queues) {
    const queueTable = queue.table.spec.qualifiedName;
    for (const pair of [[queueTable, queue.group ?? WHOLE_TABLE_QUEUE_NAME], [queueTable, WHOLE_TABLE_QUEUE_NAME]] as const) {
      keys.set(keyOf(pair), pair);
    }
  }
  return [...keys.values()];
}

function inWorkPairsOf(subscriptions: readonly ControlReadSubscription[]): ControlReadPair[] {
  const pairs = new Map<string, ControlReadPair>();
  for (const subscription of subscriptions) {
    const queueTable = subscription.queue.table.spec.qualifiedName;
    for (const id of subscription.inWorkIds()) pairs.set(keyOf([queueTable, id]), [queueTable, id]);
  }
  return [...pairs.values()];
}

function isPausedIn(paused: ReadonlySet<string>, queue: Queue<unknown>): boolean {
  const queueTable = queue.table.spec.qualifiedName;
  return paused.has(keyOf([queueTable, queue.group ?? WHOLE_TABLE_QUEUE_NAME])) || paused.has(keyOf([queueTable, WHOLE_TABLE_QUEUE_NAME]));
}

function keyOf(pair: ControlReadPair): string {
  return `${pair[0]}\u0000${pair[1]}`;
}

/** MySQL's binary key columns come back as bytes; the names were written as UTF-8. */
function textOf(value: unknown): string {
  return value instanceof Uint8Array ? Buffer.from(value).toString('utf8') : String(value);
}
