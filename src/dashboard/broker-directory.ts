import type { DialectName } from '../dialect/dialect.js';
import {
  createHeartbeatStatements,
  HEARTBEAT_AGE_COLUMNS,
  HEARTBEAT_COLUMNS,
  parseHeartbeatTable,
  type HeartbeatStatements,
  type HeartbeatTable,
} from '../dialect/heartbeat-statements.js';
import type { Driver } from '../driver/driver.js';
import { bindStatement } from '../statement.js';
import type { RelayView, WaitingNameView } from './dashboard-api.js';

/** A broker is listed while its row was written within this many of its own intervals. */
export const LIVE_WITHIN_INTERVALS = 3;

/** One running broker as its heartbeat row describes it. */
export interface BrokerSeen {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly intervalMs: number;
  readonly seenMsAgo: number;
  readonly startedMsAgo: number;
  /** The broker's `stats().subscriptions` as written at its last beat. */
  readonly subscriptions: readonly unknown[];
  /**
   * Its outbox relays as written at its last beat (`HeartbeatRelay`): none from a broker of a
   * version before them, and entries without these fields are left out.
   */
  readonly relays: readonly RelayView[];
}

export interface BrokerList {
  readonly table: string;
  /** Brokers seen within `LIVE_WITHIN_INTERVALS` of their interval, oldest first. */
  readonly brokers: readonly BrokerSeen[];
  /** Rows of brokers that stopped beating without deleting them (killed, say). */
  readonly staleCount: number;
  /** Why the table could not be read (missing until a broker with heartbeats starts); null when read. */
  readonly problem: string | null;
}

/** Reads the heartbeat table; never writes to it (the dashboard creates nothing). */
export class BrokerDirectory {
  readonly #driver: Driver;
  readonly #tableName: string;
  readonly #table: HeartbeatTable;
  readonly #statements: HeartbeatStatements;

  constructor(options: { driver: Driver; database: DialectName; table: string }) {
    this.#driver = options.driver;
    this.#tableName = options.table;
    this.#table = parseHeartbeatTable(options.table, options.database);
    this.#statements = createHeartbeatStatements(options.database);
  }

  async list(): Promise<BrokerList> {
    let rows: Record<string, unknown>[];
    try {
      rows = (await this.#driver.execute(bindStatement(this.#statements.list(this.#table), {}))).rows;
    } catch (error) {
      const reason = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
      return {
        table: this.#tableName,
        brokers: [],
        staleCount: 0,
        problem: `heartbeat table "${this.#tableName}" cannot be read (${reason}); start a broker with the heartbeat option to create it`,
      };
    }
    const seen = rows.map(brokerOf);
    const brokers = seen.filter((broker) => broker.seenMsAgo <= LIVE_WITHIN_INTERVALS * broker.intervalMs);
    return { table: this.#tableName, brokers, staleCount: seen.length - brokers.length, problem: null };
  }
}

/** One row of the heartbeat table as the dashboard and `stats` read it. */
export function brokerOf(row: Record<string, unknown>): BrokerSeen {
  const c = HEARTBEAT_COLUMNS;
  const seenMsAgo = Math.max(0, Number(row[HEARTBEAT_AGE_COLUMNS.seenMsAgo]));
  return {
    id: String(row[c.brokerId]),
    host: String(row[c.host]),
    pid: Number(row[c.pid]),
    intervalMs: Number(row[c.intervalMs]),
    seenMsAgo,
    startedMsAgo: Math.max(0, Number(row[HEARTBEAT_AGE_COLUMNS.startedMsAgo])),
    ...subscriptionsAndRelaysOf(row[c.subscriptions], seenMsAgo),
  };
}

/**
 * The entries of the row's JSON array: relays are marked `kind: 'relay'`, every other entry is a
 * subscription. A row some other program wrote badly shows neither rather than hiding the broker.
 */
function subscriptionsAndRelaysOf(value: unknown, seenMsAgo: number): { subscriptions: unknown[]; relays: RelayView[] } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(String(value));
  } catch {
    return { subscriptions: [], relays: [] };
  }
  if (!Array.isArray(parsed)) return { subscriptions: [], relays: [] };
  const isRelay = (entry: unknown) => (entry as { kind?: unknown } | null)?.kind === 'relay';
  return { subscriptions: parsed.filter((entry) => !isRelay(entry)), relays: parsed.filter(isRelay).flatMap((entry: object) => relayViewOf(entry, seenMsAgo)) };
}

function relayViewOf(entry: object, seenMsAgo: number): RelayView[] {
  const { outbox, destination, relayed, failedSends, namesInWork, namesWaitingToRetry, waitingNames } = entry as Record<string, unknown>;
  if (typeof outbox !== 'string' || typeof destination !== 'string') return [];
  if (typeof relayed !== 'number' || typeof failedSends !== 'number' || typeof namesInWork !== 'number' || typeof namesWaitingToRetry !== 'number') {
    return [];
  }
  const waiting = (Array.isArray(waitingNames) ? (waitingNames as unknown[]) : []).flatMap((name) => waitingNameViewOf(name, seenMsAgo));
  return [{ outbox, destination, relayed, failedSends, namesInWork, namesWaitingToRetry, waitingNames: waiting }];
}

/** The broker counted `retryInMs` from its beat, `seenMsAgo` before the read: a name whose time came since then is due now. */
function waitingNameViewOf(entry: unknown, seenMsAgo: number): WaitingNameView[] {
  const { name, failedSends, retryInMs, error } = (entry ?? {}) as Record<string, unknown>;
  if (typeof name !== 'string' || typeof failedSends !== 'number' || typeof retryInMs !== 'number') return [];
  if (error !== null && typeof error !== 'string') return [];
  return [{ name, failedSends, retryInMs: Math.max(0, retryInMs - seenMsAgo), error }];
}
