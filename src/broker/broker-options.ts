import { DEFAULT_MAX_PAYLOAD_BYTES } from '../delivery/codec.js';
import { DeclarationError } from '../errors.js';
import { DEFAULT_ACQUIRE_TIMEOUT_MS } from '../driver/pool-gate.js';
import { parseDatabaseUrl } from '../driver/database-url.js';
import type { PoolerMode } from '../driver/driver.js';
import { MAX_LEASE_MS, positiveMilliseconds } from '../option-checks.js';
import { DEFAULT_SCHEDULES_TABLE } from '../dialect/schedule-statements.js';
import { parseQualifiedName } from '../table/identifier.js';
import { DEFAULT_DEDUPE_WINDOWS_TABLE } from '../dialect/dedupe-window-statements.js';
import { DEFAULT_QUEUE_CONTROLS_TABLE } from '../dialect/queue-control-statements.js';
import { DEFAULT_CANCELLATIONS_TABLE } from '../dialect/cancellation-statements.js';
import { DEFAULT_RATE_LIMITS_TABLE } from '../dialect/rate-limit-statements.js';
import type { Dialect } from '../dialect/dialect.js';
import { acceptServiceDialect } from '../dialect/service-dialect.js';
import { resolveHeartbeatOptions, type HeartbeatOptions, type ResolvedHeartbeatOptions } from './heartbeat.js';

export interface Logger {
  warn(message: string, detail?: Record<string, unknown>): void;
  /**
   * `message` is one line: the error's name and message and, for a failed delivery, the message
   * id, the attempt and what happens next. `detail` holds the same facts as fields (see
   * `DeliveryFailureDetail`) and the thrown value as `error`, stack included.
   */
  error(message: string, detail?: Record<string, unknown>): void;
}

export interface BrokerOptions {
  /**
   * 'postgres://…', 'mysql://…', 'mariadb://…', 'sqlite:./queue.db', 'sqlite::memory:', or the
   * service's own pg.Pool, mysql2 pool or better-sqlite3 Database (never closed by the broker).
   */
  database: string | object;
  /** The pool the broker opens from a URL. Default 10 connections. */
  pool?: { max?: number };
  /** How long a subscription waits after a claim found nothing. Default 1,000 ms. */
  pollIntervalMs?: number;
  /** Lease length for lease tables, whole seconds (shorter is rounded up). Default 30,000 ms. */
  leaseMs?: number;
  /** The most connections the service may open to the database in all (WP-13). */
  connectionLimit?: number;
  /** How long `stop()` lets handlers finish before aborting their signal. Default 30,000 ms. */
  stopTimeoutMs?: number;
  /**
   * How long anything of the broker waits for a pool connection before failing with a
   * `PoolExhaustedError` that names the numbers. Default 30,000 ms.
   */
  acquireTimeoutMs?: number;
  /** Where warnings and errors without an `error` listener go. Default: the console. */
  logger?: Logger;
  /** Encoded payloads larger than this are refused before anything is written. Default 8 MiB. */
  maxPayloadBytes?: number;
  /**
   * Postgres LISTEN/NOTIFY wake-ups across processes: every publish notifies the table's channel,
   * and one connection beside the pool listens for the subscribed tables. Default: on when the
   * broker opens the pool from a postgres:// URL, off for a pool the service passes in.
   * `{ url }` turns it on with the listening connection opened on that URL instead of the pool's:
   * the server itself (or a session pooler) where the pool goes through a transaction pooler, which
   * does not keep a LISTEN. Postgres only: on elsewhere fails `start()` with an `UnsupportedError`.
   */
  listen?: boolean | { url: string };
  /**
   * PostgreSQL through a pooler (PgBouncer's `pool_mode`). `'transaction'`: each transaction may
   * run on another server session, so statements run unnamed, the advisory lock form is refused
   * and `listen` needs a URL of its own. `'session'`: sessions last, nothing changes. Undeclared,
   * `start()` looks for a pooler and refuses a transaction pooler it finds, asking for this option.
   */
  pooler?: PoolerMode;
  /**
   * MySQL or MariaDB on a Galera cluster, whose row locks hold on one node only. `singleWriter:
   * true` says every broker reading this broker's row lock tables writes through one node (its
   * address, or a proxy that sends every write to one node), which the row lock form needs there.
   * On a Galera node `start()` refuses the advisory lock form (`GET_LOCK` is the node's own), and
   * the row lock form without `singleWriter: true`; the lease form runs on every node.
   */
  galera?: GaleraOptions;
  /**
   * Opt-in: write a row about this broker (host, pid, subscriptions and their stats) to a heartbeat
   * table every `intervalMs`, deleted on stop, for `tablequeue dashboard`. The table is created if missing.
   */
  heartbeat?: HeartbeatOptions;
  /**
   * Where `schedule(...)` keeps each schedule's last fired tick: `name` or `schema.name`, created
   * if missing at start when the broker has schedules. Default `tablequeue_schedules`.
   */
  schedulesTable?: string;
  /**
   * Where `dedupeForMs` keeps its windows: `name` or `schema.name`, created if missing before the
   * first throttled publish. Default `tablequeue_dedupe_windows`.
   */
  dedupeWindowsTable?: string;
  /**
   * Where `pause`/`resume` keep which queues are paused: `name` or `schema.name`, created if
   * missing at start when the broker has subscriptions, and by `pause`. Default `tablequeue_queue_controls`.
   */
  queueControlsTable?: string;
  /**
   * Where `cancel` records cancels of messages in work for the brokers running them: `name` or
   * `schema.name`, created if missing at start when the broker has subscriptions, and by `cancel`.
   * Default `tablequeue_cancellations`.
   */
  cancellationsTable?: string;
  /**
   * Where subscriptions with `rate` keep their slots: `name` or `schema.name`, created if missing
   * when such a subscription opens. Default `tablequeue_rate_limits`.
   */
  rateLimitsTable?: string;
  /**
   * The service's own dialect, for a database that speaks one of the three protocols with
   * differences (a fork, a proxy, an older server): `defineDialect({ basedOn, … })`, or
   * `builtInDialect(name)` to name one. Its interface version is checked here (a
   * `DialectVersionError`), its protocol, server version and every statement of each table the
   * broker reads at `start()` (a `StatementError` names what it cannot render). Default: the
   * built-in dialect of the database found at start. See docs/dialects.md.
   */
  dialect?: Dialect;
}

/** See `BrokerOptions.galera`. */
export interface GaleraOptions {
  /** Every broker of the row lock tables writes through one node of the cluster. */
  singleWriter: boolean;
}

export interface ResolvedBrokerOptions {
  readonly database: string | object;
  readonly poolSize: number | undefined;
  readonly pollIntervalMs: number;
  readonly leaseMs: number;
  readonly connectionLimit: number | undefined;
  readonly stopTimeoutMs: number;
  readonly acquireTimeoutMs: number;
  readonly logger: Logger;
  readonly maxPayloadBytes: number;
  /** Undefined: the default, decided at start by the database. */
  readonly listen: boolean | undefined;
  /** Where the LISTEN session connects instead of the pool's settings (`listen: { url }`). */
  readonly listenUrl: string | undefined;
  readonly pooler: PoolerMode | undefined;
  readonly galera: Readonly<GaleraOptions> | undefined;
  readonly heartbeat: ResolvedHeartbeatOptions | undefined;
  readonly schedulesTable: string;
  readonly dedupeWindowsTable: string;
  readonly queueControlsTable: string;
  readonly cancellationsTable: string;
  readonly rateLimitsTable: string;
  /** The service's own dialect, guarded; undefined: the built-in one of the database found at start. */
  readonly dialect: Dialect | undefined;
}

export const DEFAULT_POLL_INTERVAL_MS = 1_000;
export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_STOP_TIMEOUT_MS = 30_000;

const WHERE = 'new Broker';

const OPTION_KEYS = new Set([
  'database',
  'pool',
  'pollIntervalMs',
  'leaseMs',
  'connectionLimit',
  'stopTimeoutMs',
  'acquireTimeoutMs',
  'logger',
  'maxPayloadBytes',
  'listen',
  'pooler',
  'galera',
  'heartbeat',
  'schedulesTable',
  'dedupeWindowsTable',
  'queueControlsTable',
  'cancellationsTable',
  'rateLimitsTable',
  'dialect',
]);

/** The error goes last, where the console prints its stack (and cause) below the line and the other fields. */
const consoleLogger: Logger = {
  warn: (message, detail) => console.warn(`tablequeue: ${message}`, detail ?? ''),
  error: (message, detail) => {
    const { error, ...fields } = detail ?? {};
    console.error(`tablequeue: ${message}`, fields, ...(error === undefined ? [] : [error]));
  },
};

export function resolveBrokerOptions(options: BrokerOptions): ResolvedBrokerOptions {
  if (options === null || typeof options !== 'object') {
    throw new DeclarationError("new Broker needs options such as { database: 'sqlite:./queue.db' }");
  }
  for (const key of Object.keys(options)) {
    if (!OPTION_KEYS.has(key)) {
      throw new DeclarationError(`new Broker: unknown option "${key}"; the options are ${[...OPTION_KEYS].join(', ')}`);
    }
  }
  if (options.database === undefined || options.database === null) {
    throw new DeclarationError(
      "new Broker needs a database: a URL ('postgres://…', 'mysql://…', 'mariadb://…', 'sqlite:./queue.db', 'sqlite::memory:') or the service's own pool",
    );
  }
  const poolSize = options.pool?.max;
  if (poolSize !== undefined && (!Number.isInteger(poolSize) || poolSize < 1)) {
    throw new DeclarationError(`new Broker: pool.max must be a whole number of at least 1, got ${String(poolSize)}`);
  }
  const connectionLimit = options.connectionLimit;
  if (connectionLimit !== undefined && (!Number.isInteger(connectionLimit) || connectionLimit < 1)) {
    throw new DeclarationError(`new Broker: connectionLimit must be a whole number of at least 1, got ${String(connectionLimit)}`);
  }
  if (options.schedulesTable !== undefined) parseQualifiedName(options.schedulesTable, `${WHERE}: schedulesTable`);
  if (options.dedupeWindowsTable !== undefined) parseQualifiedName(options.dedupeWindowsTable, `${WHERE}: dedupeWindowsTable`);
  if (options.queueControlsTable !== undefined) parseQualifiedName(options.queueControlsTable, `${WHERE}: queueControlsTable`);
  if (options.cancellationsTable !== undefined) parseQualifiedName(options.cancellationsTable, `${WHERE}: cancellationsTable`);
  if (options.rateLimitsTable !== undefined) parseQualifiedName(options.rateLimitsTable, `${WHERE}: rateLimitsTable`);
  const listenUrl = resolveListenUrl(options.listen);
  if (options.pooler !== undefined && options.pooler !== 'transaction' && options.pooler !== 'session') {
    throw new DeclarationError(
      `new Broker: pooler must be 'transaction' or 'session' (PgBouncer's pool_mode), got ${String(options.pooler)}`,
    );
  }
  return Object.freeze({
    database: options.database,
    poolSize,
    pollIntervalMs: positiveMilliseconds(options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS, 'pollIntervalMs', WHERE),
    leaseMs: positiveMilliseconds(options.leaseMs ?? DEFAULT_LEASE_MS, 'leaseMs', WHERE, MAX_LEASE_MS),
    connectionLimit,
    stopTimeoutMs: positiveMilliseconds(options.stopTimeoutMs ?? DEFAULT_STOP_TIMEOUT_MS, 'stopTimeoutMs', WHERE),
    acquireTimeoutMs: positiveMilliseconds(options.acquireTimeoutMs ?? DEFAULT_ACQUIRE_TIMEOUT_MS, 'acquireTimeoutMs', WHERE),
    logger: options.logger ?? consoleLogger,
    maxPayloadBytes: positiveWhole(options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES, 'maxPayloadBytes'),
    listen: listenUrl === undefined ? (options.listen as boolean | undefined) : true,
    listenUrl,
    pooler: options.pooler,
    galera: resolveGaleraOptions(options.galera),
    heartbeat: resolveHeartbeatOptions(options.heartbeat),
    schedulesTable: options.schedulesTable ?? DEFAULT_SCHEDULES_TABLE,
    dedupeWindowsTable: options.dedupeWindowsTable ?? DEFAULT_DEDUPE_WINDOWS_TABLE,
    queueControlsTable: options.queueControlsTable ?? DEFAULT_QUEUE_CONTROLS_TABLE,
    cancellationsTable: options.cancellationsTable ?? DEFAULT_CANCELLATIONS_TABLE,
    rateLimitsTable: options.rateLimitsTable ?? DEFAULT_RATE_LIMITS_TABLE,
    dialect: options.dialect === undefined ? undefined : acceptServiceDialect(options.dialect),
  });
}

function resolveGaleraOptions(galera: BrokerOptions['galera']): Readonly<GaleraOptions> | undefined {
  if (galera === undefined) return undefined;
  const keys = galera === null || typeof galera !== 'object' ? undefined : Object.keys(galera);
  if (keys === undefined || keys.length !== 1 || typeof galera.singleWriter !== 'boolean') {
    throw new DeclarationError(
      `new Broker: galera must be { singleWriter: true } (every broker writes through one node of the cluster) or { singleWriter: false }, got ${describeGalera(galera)}`,
    );
  }
  return Object.freeze({ singleWriter: galera.singleWriter });
}

function describeGalera(galera: unknown): string {
  if (galera === null || typeof galera !== 'object') return String(galera);
  const singleWriter = (galera as { singleWriter?: unknown }).singleWriter;
  return `an object with ${JSON.stringify(Object.keys(galera))}${singleWriter === undefined ? '' : ` and singleWriter ${String(singleWriter)}`}`;
}

function resolveListenUrl(listen: BrokerOptions['listen']): string | undefined {
  if (listen === undefined || typeof listen === 'boolean') return undefined;
  const keys = listen === null || typeof listen !== 'object' ? undefined : Object.keys(listen);
  if (keys === undefined || keys.length !== 1 || typeof listen.url !== 'string') {
    throw new DeclarationError(
      `new Broker: listen must be true, false or { url: 'postgres://…' } (the LISTEN connection's own URL), got ${describeListen(listen)}`,
    );
  }
  let kind: string;
  try {
    kind = parseDatabaseUrl(listen.url).kind;
  } catch (error) {
    throw new DeclarationError(`new Broker: listen.url: ${(error as Error).message}`);
  }
  if (kind !== 'postgres') {
    throw new DeclarationError('new Broker: listen.url must be a postgres:// URL: LISTEN/NOTIFY is PostgreSQL-only');
  }
  return listen.url;
}

function describeListen(listen: unknown): string {
  return listen !== null && typeof listen === 'object' ? `an object with ${JSON.stringify(Object.keys(listen))}` : String(listen);
}

function positiveWhole(value: unknown, name: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new DeclarationError(`new Broker: ${name} must be a whole number of at least 1, got ${String(value)}`);
  }
  return value;
}
