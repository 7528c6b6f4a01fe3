import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { DialectName } from '../dialect/dialect.js';
import {
  createHeartbeatStatements,
  DEFAULT_HEARTBEAT_TABLE,
  parseHeartbeatTable,
  type HeartbeatStatements,
  type HeartbeatTable,
} from '../dialect/heartbeat-statements.js';
import type { Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { DeclarationError } from '../errors.js';
import { abortableSleep } from '../internal/abortable-sleep.js';
import { bindStatement } from '../statement.js';
import { parseQualifiedName } from '../table/identifier.js';
import type { RelayWaitingName } from '../outbox/name-backoffs.js';
import type { RelayStats } from '../outbox/relay-runtime.js';
import type { RowsInWorkReason, SubscriptionStats } from '../subscription/subscription.js';

/**
 * Opt-in: the broker writes one row about itself to a heartbeat table every interval and deletes
 * it on stop, so `tablequeue dashboard` can list running brokers, their subscriptions and their
 * outbox relays.
 */
export interface HeartbeatOptions {
  /** `name` or `schema.name`; created if missing when the broker starts. Default `tablequeue_brokers`. */
  table?: string;
  /** How often the row is written. Default 10,000 ms; the dashboard hides a row not written for three intervals. */
  intervalMs?: number;
}

export interface ResolvedHeartbeatOptions {
  readonly table: string;
  readonly intervalMs: number;
}

export const DEFAULT_HEARTBEAT_INTERVAL_MS = 10_000;

/** Written as a whole number of milliseconds into an integer column: at most about 24 days. */
const MAX_HEARTBEAT_INTERVAL_MS = 2_000_000_000;

export function resolveHeartbeatOptions(options: HeartbeatOptions | undefined): ResolvedHeartbeatOptions | undefined {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object') {
    throw new DeclarationError(`new Broker: heartbeat must be an object such as { table: '${DEFAULT_HEARTBEAT_TABLE}' }`);
  }
  const table = options.table ?? DEFAULT_HEARTBEAT_TABLE;
  parseQualifiedName(table, 'new Broker: heartbeat.table');
  const intervalMs = options.intervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
  if (!Number.isInteger(intervalMs) || intervalMs < 1 || intervalMs > MAX_HEARTBEAT_INTERVAL_MS) {
    throw new DeclarationError(
      `new Broker: heartbeat.intervalMs must be a whole number of milliseconds from 1 to ${MAX_HEARTBEAT_INTERVAL_MS}, got ${String(intervalMs)}`,
    );
  }
  return Object.freeze({ table, intervalMs });
}

/**
 * One subscription in a heartbeat row: its stats, whose `queue` says what it reads
 * (`schema.table/group`), and where its dead letters go, so that the operator tools can tell
 * the queues no broker reads from the dead-letter groups that no broker should.
 */
export interface HeartbeatSubscription extends SubscriptionStats {
  /** The subscription's `deadLetter` option: a group of the table or a table; null without one. */
  readonly deadLetter: string | null;
  /** Why its lease claims count the queue's rows in work (a concurrency limit, FIFO groups); null when they count nothing. */
  readonly countsRowsInWork: RowsInWorkReason | null;
}

/**
 * One outbox relay in a heartbeat row: its stats, marked `kind: 'relay'`. Relays share the
 * subscriptions' JSON array, so a table made before they were reported needs no new column; an
 * entry without a `queue` is not a subscription to any reader, of any version. A waiting name
 * says when it goes again as milliseconds from the beat, as the row's other times are kept apart
 * from the clocks of the hosts that read them.
 */
export interface HeartbeatRelay extends Omit<RelayStats, 'waitingNames'> {
  readonly kind: 'relay';
  readonly waitingNames: readonly HeartbeatWaitingName[];
}

export interface HeartbeatWaitingName extends Omit<RelayWaitingName, 'retryAt'> {
  /** From the beat until the relay sends the name again. */
  readonly retryInMs: number;
}

export interface HeartbeatStartOptions {
  readonly driver: Driver;
  readonly database: DialectName;
  readonly options: ResolvedHeartbeatOptions;
  /** Read at every beat and written as JSON, with the relays after the subscriptions. */
  readonly subscriptions: () => readonly HeartbeatSubscription[];
  readonly relays: () => readonly RelayStats[];
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
}

/** One broker's row in the heartbeat table, from start to stop. */
export class Heartbeat {
  readonly brokerId = randomUUID();
  readonly #start: HeartbeatStartOptions;
  readonly #statements: HeartbeatStatements;
  readonly #table: HeartbeatTable;
  readonly #stopping = new AbortController();
  #loop: Promise<void> | undefined;

  private constructor(start: HeartbeatStartOptions) {
    this.#start = start;
    this.#statements = createHeartbeatStatements(start.database);
    this.#table = parseHeartbeatTable(start.options.table, start.database);
  }

  /** Creates the table if missing and writes the first row; a failure here fails the broker's start. */
  static async start(options: HeartbeatStartOptions): Promise<Heartbeat> {
    const heartbeat = new Heartbeat(options);
    await createSideTable(options.driver, 'heartbeat.createTable', heartbeat.#statements.createTable(heartbeat.#table));
    await heartbeat.#beat();
    heartbeat.#loop = heartbeat.#run();
    return heartbeat;
  }

  /** Ends the beats and deletes the row; a failure is reported, never thrown. */
  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#loop;
    const remove = this.#statements.remove(this.#table);
    await this.#start.driver
      .execute(bindStatement(remove, { 'column:broker_id': this.brokerId }))
      .catch((error: unknown) => this.#start.onError(error, { phase: 'heartbeat', statement: remove.name }));
  }

  async #run(): Promise<void> {
    const signal = this.#stopping.signal;
    for (;;) {
      await abortableSleep(this.#start.options.intervalMs, signal);
      if (signal.aborted) return;
      await this.#beat().catch((error: unknown) => this.#start.onError(error, { phase: 'heartbeat', statement: 'heartbeat.beat' }));
    }
  }

  async #beat(): Promise<void> {
    const { driver, options, subscriptions, relays } = this.#start;
    const now = Date.now();
    const relayEntries = relays().map(
      ({ waitingNames, ...stats }): HeartbeatRelay => ({
        kind: 'relay',
        ...stats,
        waitingNames: waitingNames.map(({ retryAt, ...waiting }) => ({ ...waiting, retryInMs: Math.max(0, retryAt.getTime() - now) })),
      }),
    );
    await driver.execute(
      bindStatement(this.#statements.beat(this.#table), {
        'column:broker_id': this.brokerId,
        'column:host': hostname(),
        'column:pid': process.pid,
        'column:interval_ms': options.intervalMs,
        'column:subscriptions': JSON.stringify([...subscriptions(), ...relayEntries]),
      }),
    );
  }
}
