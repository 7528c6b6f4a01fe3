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

function brokerOf(row: Record<string, unknown>): BrokerSeen {
  const c = HEARTBEAT_COLUMNS;
  return {
    id: String(row[c.brokerId]),
    host: String(row[c.host]),
    pid: Number(row[c.pid]),
    intervalMs: Number(row[c.intervalMs]),
    seenMsAgo: Math.max(0, Number(row[HEARTBEAT_AGE_COLUMNS.seenMsAgo])),
    startedMsAgo: Math.max(0, Number(row[HEARTBEAT_AGE_COLUMNS.startedMsAgo])),
    subscriptions: parseSubscriptions(row[c.subscriptions]),
  };
}

/** A row some other program wrote badly shows no subscriptions rather than hiding the broker. */
function parseSubscriptions(value: unknown): unknown[] {
  try {
    const parsed: unknown = JSON.parse(String(value));
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}
