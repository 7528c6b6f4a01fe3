import type { DeadLetterLocation, PeekedRow } from '../admin/inspection.js';
import { openQueueInspector, type InspectorColumnNames } from '../admin/open-queue-inspector.js';
import { ScheduleListing } from '../admin/schedule-listing.js';
import { openDialect } from '../broker/open-dialect.js';
import { QueueControls, type PausedQueue } from '../broker/queue-controls.js';
import { DEFAULT_QUEUE_CONTROLS_TABLE, WHOLE_TABLE_QUEUE_NAME } from '../dialect/queue-control-statements.js';
import { DEFAULT_HEARTBEAT_TABLE } from '../dialect/heartbeat-statements.js';
import { DEFAULT_SCHEDULES_TABLE } from '../dialect/schedule-statements.js';
import { createDriver, refusePoolerOffPostgres } from '../driver/create-driver.js';
import type { Driver, PoolerFinding, PoolerMode } from '../driver/driver.js';
import { DeclarationError } from '../errors.js';
import { checkAllowedHosts } from '../internal/host-allow-list.js';
import { MAX_TIMER_MS } from '../option-checks.js';
import { parseQualifiedName } from '../table/identifier.js';
import { BrokerDirectory } from './broker-directory.js';
import { BrokerDrainRate } from './broker-drain-rate.js';
import type { DeadLetterTableView, DeadLetterView, PausedView, PauseRequest, RequeueRequest } from './dashboard-api.js';
import { startDashboardServer, type DashboardData, type RunningDashboard } from './dashboard-server.js';
import { QueueSampler, type DeadLetterSample, type WatchedTable } from './queue-sampler.js';

export interface DashboardOptions {
  /** `postgres://…`, `mysql://…`, `mariadb://…` or `sqlite:…`, or an open `Driver` the caller keeps and closes. */
  readonly database: string | Driver;
  /** Queue tables to show, `name` or `schema.name`. */
  readonly tables: readonly string[];
  /** The schema of tables named without one. */
  readonly schema?: string;
  /** Column names where the tables differ from `tablequeue init`'s; the same for every table. */
  readonly columns?: InspectorColumnNames;
  /** Per table of `tables` (as spelt there), its column names instead of `columns`. */
  readonly columnsByTable?: ReadonlyMap<string, InspectorColumnNames>;
  /** Where the tables' dead letters are; without it none are listed and requeue is not offered. */
  readonly deadLetter?: DeadLetterLocation;
  /** Per table of `tables` (as spelt there), where its dead letters are instead of `deadLetter`. */
  readonly deadLetterByTable?: ReadonlyMap<string, DeadLetterLocation>;
  /** The brokers' heartbeat table. Default `tablequeue_brokers`. */
  readonly heartbeatTable?: string;
  /** The brokers' schedules table, shown when it exists. Default `tablequeue_schedules`. */
  readonly schedulesTable?: string;
  /** Where pauses are kept (the brokers' queueControlsTable). Default `tablequeue_queue_controls`. */
  readonly queueControlsTable?: string;
  /** Whether `POST /api/requeue` and `POST /api/pause` may change anything; otherwise they answer 403. Default false. */
  readonly allowActions?: boolean;
  /** Default 127.0.0.1: only this machine can open the page. */
  readonly host?: string;
  /**
   * Host names the page may be opened by besides localhost, 127.0.0.1, [::1] and `host` (which
   * names no host when it is 0.0.0.0 or ::): `name` on any port, or `name:port`.
   */
  readonly allowedHosts?: readonly string[];
  /** Default 4300; 0 picks a free port. */
  readonly port?: number;
  /** How often the tables are inspected and the page refreshes. Default 2,000 ms. */
  readonly refreshMs?: number;
  /**
   * PostgreSQL through a pooler opened from a URL: its mode, as the broker's `pooler` option
   * declares it. Without it the dashboard looks for one; a driver passed as `database` keeps its own.
   */
  readonly pooler?: PoolerMode;
  /** Failed inspections; the page shows them too. */
  readonly onError?: (error: unknown, detail: Record<string, unknown>) => void;
}

export interface Dashboard {
  readonly url: string;
  close(): Promise<void>;
}

export const DEFAULT_DASHBOARD_PORT = 4300;
export const DEFAULT_DASHBOARD_HOST = '127.0.0.1';
export const DEFAULT_REFRESH_MS = 2_000;

/** The chart covers the last ten minutes, at most 600 points. */
const HISTORY_MS = 600_000;
const MAX_HISTORY_POINTS = 600;
const DEAD_LETTERS_SHOWN = 50;
const PAYLOAD_PREVIEW_CHARACTERS = 200;
/** Each table's inspection, the dead-letter peeks and the heartbeat read may run at once. */
const POOL_SIZE = 4;

/**
 * Opens the database, an inspector per table, and the HTTP server. Reads only, except a requeue
 * with `allowActions`.
 */
export async function openDashboard(options: DashboardOptions): Promise<Dashboard> {
  const refreshMs = options.refreshMs ?? DEFAULT_REFRESH_MS;
  if (!Number.isInteger(refreshMs) || refreshMs < 100 || refreshMs > MAX_TIMER_MS) {
    throw new DeclarationError(
      `the dashboard's refresh must be a whole number of milliseconds from 100 to ${MAX_TIMER_MS}, got ${String(refreshMs)}`,
    );
  }
  checkAllowedHosts(options.allowedHosts, 'allowedHosts');
  const ownsDriver = typeof options.database === 'string';
  const driver = typeof options.database === 'string' ? createDriver(options.database, { poolSize: POOL_SIZE, pooler: options.pooler }) : options.database;
  refusePoolerOffPostgres(driver, options.pooler, 'pooler');
  if (ownsDriver) await driver.open();
  const closing: (() => Promise<void>)[] = ownsDriver ? [() => driver.close()] : [];
  const closeAll = async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => undefined);
  };
  try {
    const dialect = await openDialect(driver);
    const heartbeatTable = options.heartbeatTable ?? DEFAULT_HEARTBEAT_TABLE;
    const directory = new BrokerDirectory({ driver, database: dialect.name, table: heartbeatTable });
    const schedulesTable = options.schedulesTable ?? DEFAULT_SCHEDULES_TABLE;
    const scheduleListing = new ScheduleListing({ driver, database: dialect.name, table: schedulesTable });
    const queueControlsTable = options.queueControlsTable ?? DEFAULT_QUEUE_CONTROLS_TABLE;
    const controls = new QueueControls({ driver, database: dialect.name, table: queueControlsTable, notify: dialect.notify });
    const tables = await openTables(driver, options, closing);
    const drainRate = new BrokerDrainRate(tables.map((watched) => watched.table));
    const sampler = new QueueSampler({
      tables,
      intervalMs: refreshMs,
      historySize: Math.min(MAX_HISTORY_POINTS, Math.ceil(HISTORY_MS / refreshMs)),
      onError: (error, table) => options.onError?.(error, { table }),
      deadLettersPerTable: DEAD_LETTERS_SHOWN,
      readBrokers: () => directory.list(),
      readSchedules: () => scheduleListing.list(),
      // Missing until someone pauses a queue or a broker with subscriptions starts: nothing paused to show.
      readPaused: () => controls.listPaused().catch(() => null),
      drainRateOf: (brokers, readAt) => drainRate.update(brokers, readAt),
    });
    await sampler.start();
    closing.push(() => sampler.stop());
    const data: DashboardData = {
      config: {
        allowActions: options.allowActions ?? false,
        refreshMs,
        tables: tables.map((watched) => watched.table),
        heartbeatTable,
        schedulesTable,
        queueControlsTable,
        database: `${driver.description}${poolerShown(driver.pooler)}`,
      },
      queues: () => {
        const paused = sampler.paused();
        return sampler.snapshots().map((snapshot) => ({ ...snapshot, paused: pausedViewOf(paused, snapshot.table) }));
      },
      throughput: () => sampler.history(),
      deadLetters: () => {
        const counts = new Map(sampler.snapshots().map((snapshot) => [snapshot.table, snapshot.deadLettered]));
        return sampler.deadLetters().map((sample) => deadLetterTableView(sample, counts.get(sample.table) ?? 0));
      },
      brokers: () => sampler.brokers() ?? { table: heartbeatTable, brokers: [], staleCount: 0, problem: 'not read yet' },
      schedules: () => sampler.schedules() ?? { table: schedulesTable, schedules: [], problem: 'not read yet' },
      // A round before answering: until one runs, every page would show the moved rows where they were.
      requeue: async (request) => {
        const moved = await requeueIn(tables, request);
        await sampler.refresh();
        return moved;
      },
      pause: async (request) => {
        const paused = await pauseIn(tables, controls, request);
        await sampler.refresh();
        return paused;
      },
    };
    const server: RunningDashboard = await startDashboardServer({
      host: options.host ?? DEFAULT_DASHBOARD_HOST,
      port: options.port ?? DEFAULT_DASHBOARD_PORT,
      ...(options.allowedHosts === undefined ? {} : { allowedHosts: options.allowedHosts }),
      data,
    });
    closing.push(() => server.close());
    return { url: server.url, close: closeAll };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

async function openTables(driver: Driver, options: DashboardOptions, closing: (() => Promise<void>)[]): Promise<WatchedTable[]> {
  const tables: WatchedTable[] = [];
  for (const table of new Set(options.tables)) {
    const parsed = parseQualifiedName(table, 'table');
    const schema = parsed.schema ?? options.schema;
    const columns = options.columnsByTable?.get(table) ?? options.columns;
    const deadLetter = options.deadLetterByTable?.get(table) ?? options.deadLetter;
    const inspector = await openQueueInspector({
      database: driver,
      table: parsed.name,
      ...(schema === undefined ? {} : { schema }),
      ...(deadLetter === undefined ? {} : { deadLetter }),
      ...(columns === undefined ? {} : { columns }),
    });
    closing.push(() => inspector.close());
    tables.push({ table: schema === undefined ? parsed.name : `${schema}.${parsed.name}`, inspector, deadLetter });
  }
  return tables;
}

function deadLetterTableView(sample: DeadLetterSample, deadLettered: number): DeadLetterTableView {
  return {
    table: sample.table,
    location: sample.deadLetter === null ? null : locationText(sample.deadLetter),
    deadLettered,
    rows: sample.rows.map(deadLetterView),
    error: sample.error,
  };
}

async function requeueIn(tables: readonly WatchedTable[], request: RequeueRequest): Promise<number> {
  const watched = tables.find((candidate) => candidate.table === request.table);
  if (watched === undefined) {
    throw new DeclarationError(`the dashboard shows no table "${request.table}"; it shows ${tables.map((table) => table.table).join(', ')}`);
  }
  return watched.inspector.requeue({
    ...(request.ids === undefined ? {} : { ids: request.ids }),
    ...(request.toGroup === undefined ? {} : { toGroup: request.toGroup }),
  });
}

/**
 * The row of the controls table a request names: the table as the dashboard shows it, which is
 * its qualified name as the code declares it when the dashboard is given the same name.
 */
async function pauseIn(tables: readonly WatchedTable[], controls: QueueControls, request: PauseRequest): Promise<boolean> {
  if (!tables.some((candidate) => candidate.table === request.table)) {
    throw new DeclarationError(`the dashboard shows no table "${request.table}"; it shows ${tables.map((table) => table.table).join(', ')}`);
  }
  const key = { queueTable: request.table, queueName: request.group ?? WHOLE_TABLE_QUEUE_NAME };
  await (request.paused ? controls.pause(key) : controls.resume(key));
  return controls.isPaused(key);
}

function pausedViewOf(paused: readonly PausedQueue[] | null, table: string): PausedView | null {
  if (paused === null) return null;
  const names = paused.filter((queue) => queue.queueTable === table).map((queue) => queue.queueName);
  return { wholeTable: names.includes(WHOLE_TABLE_QUEUE_NAME), groups: names.filter((name) => name !== WHOLE_TABLE_QUEUE_NAME) };
}

function locationText(location: DeadLetterLocation): string {
  return location.kind === 'group' ? `group:${location.group}` : `table:${location.table}`;
}

function deadLetterView(row: PeekedRow): DeadLetterView {
  const text = typeof row.payload === 'string' ? row.payload : (JSON.stringify(row.payload) ?? '');
  return {
    id: row.id,
    group: row.group,
    attempt: row.attempt,
    attemptsMade: row.attemptsMade,
    lastError: row.lastError,
    payloadPreview: text.length > PAYLOAD_PREVIEW_CHARACTERS ? `${text.slice(0, PAYLOAD_PREVIEW_CHARACTERS)}…` : text,
  };
}

/** The pooler in front of a PostgreSQL database as the page names it after the database; empty where there is none. */
export function poolerShown(finding: PoolerFinding | undefined): string {
  if (finding === undefined) return '';
  const { declared, found } = finding;
  if (found === undefined) return declared === undefined ? '' : `, through a ${declared} pooler (declared)`;
  if (found === 'none') return declared === undefined ? '' : `, no pooler found (${declared} declared)`;
  if (found === declared) return `, through a ${found} pooler`;
  return `, through a ${found} pooler (found${declared === undefined ? '' : `; ${declared} declared`})`;
}
