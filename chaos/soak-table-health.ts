/**
 * What the soak watches on the queue table itself while it churns: how long the claim statement
 * takes, what the table leaves behind for vacuum (PostgreSQL) or purge (MariaDB), and what the
 * files grow to. Also the long transaction in another session that holds both back.
 */
import type { Stand, TestDatabase } from '../conformance/stand.js';
import { createDialect } from '../src/dialect/create-dialect.js';
import type { Connection, Driver } from '../src/driver/driver.js';
import type { QueueTable } from '../src/index.js';
import { bindStatement, type BoundStatement } from '../src/statement.js';
import { roleColumns } from '../src/table/table-spec.js';
import { percentile } from '../bench/statistics.js';
import { sleep } from './chaos-processes.js';

/**
 * One probe every 250 ms gives 40 claim timings per 10 s sample: enough for a p99 that is not just
 * the maximum of a handful, at a cost of four claims a second that take one row each and roll back.
 */
const PROBE_EVERY_MS = 250;
const PROBE_LEASE_MS = 5_000;

/** The queue table's state at one sample; fields a database does not have are undefined. */
export interface TableHealth {
  /** The claim statement's time over the probes since the last sample, in ms. */
  readonly claimP50Ms: number | undefined;
  readonly claimP99Ms: number | undefined;
  /** PostgreSQL: pages (8 kB) the claim's scan touched, median over the probes: what dead index entries cost. */
  readonly claimPagesP50: number | undefined;
  readonly probes: number;
  readonly liveRows: number | undefined;
  /** PostgreSQL: `n_dead_tup` of pg_stat_user_tables. */
  readonly deadRows: number | undefined;
  /** PostgreSQL: updates that were HOT (no new index entries), of all updates so far. */
  readonly hotUpdates: number | undefined;
  readonly updates: number | undefined;
  /** PostgreSQL: the heap's size; MariaDB: the table's .ibd file (rows and indexes together). */
  readonly tableBytes: number;
  /** PostgreSQL: every index of the table together. */
  readonly indexBytes: number | undefined;
  readonly autovacuumRuns: number | undefined;
  readonly lastAutovacuum: string | undefined;
  /** PostgreSQL: the age in transactions of the oldest snapshot on the database (what vacuum may not pass). */
  readonly horizonAgeXids: number | undefined;
  /** MariaDB: `History list length` from SHOW ENGINE INNODB STATUS (undo logs purge has not caught up with; server-wide). */
  readonly historyListLength: number | undefined;
}

/**
 * Times the table's own claim statement, as the broker renders it, on a connection of its own:
 * each probe claims one row in a transaction and rolls it back, so the broker's claims (which
 * skip locked rows) lose nothing. PostgreSQL runs it under EXPLAIN (ANALYZE, BUFFERS) and reports
 * the server's execution time and the pages the claim's scan touched; MariaDB's claim is its
 * locking select, timed here around the call.
 */
export class ClaimProbe {
  readonly #stand: Stand;
  readonly #driver: Driver;
  readonly #table: QueueTable;
  readonly #group: string;
  #timings: number[] = [];
  #pages: number[] = [];
  #running: Promise<void> | undefined;
  #isStopping = false;

  private constructor(stand: Stand, driver: Driver, table: QueueTable, group: string) {
    this.#stand = stand;
    this.#driver = driver;
    this.#table = table;
    this.#group = group;
  }

  static async start(stand: Stand, db: TestDatabase, table: QueueTable, group: string): Promise<ClaimProbe> {
    const probe = new ClaimProbe(stand, await db.openDriver({ poolSize: 1 }), table, group);
    probe.#running = probe.#loop();
    return probe;
  }

  /** The timings since the last call, and the page counts. */
  take(): { timings: number[]; pages: number[] } {
    const taken = { timings: this.#timings, pages: this.#pages };
    this.#timings = [];
    this.#pages = [];
    return taken;
  }

  async stop(): Promise<void> {
    this.#isStopping = true;
    await this.#running;
    await this.#driver.close();
  }

  async #loop(): Promise<void> {
    const connection = await this.#driver.acquire();
    try {
      while (!this.#isStopping) {
        await this.#probeOnce(connection);
        await sleep(PROBE_EVERY_MS);
      }
    } finally {
      connection.release();
    }
  }

  async #probeOnce(connection: Connection): Promise<void> {
    const dialect = createDialect(this.#stand.ddlDialect);
    const spec = this.#table.spec;
    const now = new Date();
    const values = { group: this.#group, now, leaseNow: now, limit: 1, lockedUntil: new Date(now.getTime() + PROBE_LEASE_MS) };
    // The broker claims with every column of the table; the soak's table has only its roles.
    const claim = dialect.lease.claim(spec, roleColumns(spec));
    const rollback: BoundStatement = { name: 'soak.probe.rollback', sql: 'ROLLBACK', values: [] };
    if (claim.kind === 'single') {
      const statement = bindStatement(claim.statement, values);
      const explained: BoundStatement = {
        name: 'soak.probe.explain',
        sql: `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement.sql}`,
        values: statement.values,
      };
      await connection.execute({ name: 'soak.probe.begin', sql: 'BEGIN', values: [] });
      try {
        const { rows } = await connection.execute(explained);
        const plan = readExplain(rows[0]);
        this.#timings.push(plan.executionMs);
        this.#pages.push(plan.claimPages);
      } finally {
        await connection.execute(rollback);
      }
      return;
    }
    for (const statement of claim.begin) await connection.execute(bindStatement(statement, values));
    try {
      const startedAt = process.hrtime.bigint();
      await connection.execute(bindStatement(claim.select, values));
      this.#timings.push(Number(process.hrtime.bigint() - startedAt) / 1e6);
    } finally {
      await connection.execute(rollback);
    }
  }
}

interface ExplainNode {
  readonly 'Subplan Name'?: string;
  readonly 'Shared Hit Blocks'?: number;
  readonly 'Shared Read Blocks'?: number;
  readonly Plans?: ExplainNode[];
}

/**
 * The execution time and the pages under the CTE that selects the rows to claim (its buffers
 * include the index and heap pages of the scan; the stamp's UPDATE runs after the plan's top node,
 * so the top node's counts would leave it out and count the scan twice with it).
 */
function readExplain(row: Record<string, unknown> | undefined): { executionMs: number; claimPages: number } {
  const cell = Object.values(row ?? {})[0];
  const [explained] = (typeof cell === 'string' ? JSON.parse(cell) : cell) as [{ 'Execution Time': number; Plan: ExplainNode }];
  const find = (node: ExplainNode): ExplainNode | undefined =>
    node['Subplan Name'] === 'CTE tablequeue_claimed' ? node : (node.Plans ?? []).map(find).find((found) => found !== undefined);
  const scan = find(explained.Plan);
  return {
    executionMs: explained['Execution Time'],
    claimPages: scan === undefined ? 0 : (scan['Shared Hit Blocks'] ?? 0) + (scan['Shared Read Blocks'] ?? 0),
  };
}

/** The table's state now, with the claim timings gathered since the last sample. */
export async function readTableHealth(stand: Stand, db: TestDatabase, tableName: string, probe: ClaimProbe): Promise<TableHealth> {
  const { timings, pages } = probe.take();
  const claims = {
    claimP50Ms: round(percentile(timings, 50)),
    claimP99Ms: round(percentile(timings, 99)),
    claimPagesP50: percentile(pages, 50),
    probes: timings.length,
  };
  if (stand.kind === 'postgres') {
    const [row] = await db.query(
      `SELECT n_live_tup, n_dead_tup, n_tup_hot_upd, n_tup_upd, autovacuum_count, last_autovacuum,
              pg_relation_size(relid) AS table_bytes, pg_indexes_size(relid) AS index_bytes,
              (SELECT max(age(backend_xmin)) FROM pg_stat_activity WHERE datname = current_database()) AS horizon_age
         FROM pg_stat_user_tables WHERE relname = $1`,
      [tableName],
    );
    const at = row?.['last_autovacuum'];
    return {
      ...claims,
      liveRows: Number(row?.['n_live_tup']),
      deadRows: Number(row?.['n_dead_tup']),
      hotUpdates: Number(row?.['n_tup_hot_upd']),
      updates: Number(row?.['n_tup_upd']),
      tableBytes: Number(row?.['table_bytes']),
      indexBytes: Number(row?.['index_bytes']),
      autovacuumRuns: Number(row?.['autovacuum_count']),
      lastAutovacuum: at instanceof Date ? at.toISOString() : at === null || at === undefined ? undefined : String(at),
      horizonAgeXids: Number(row?.['horizon_age'] ?? 0),
      historyListLength: undefined,
    };
  }
  const [status] = await db.query('SHOW ENGINE INNODB STATUS');
  const history = /History list length (\d+)/.exec(String(status?.['Status'] ?? ''));
  const [file] = await db.query(
    "SELECT FILE_SIZE AS file_bytes FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = CONCAT(DATABASE(), '/', ?)",
    [tableName],
  );
  return {
    ...claims,
    liveRows: undefined,
    deadRows: undefined,
    hotUpdates: undefined,
    updates: undefined,
    tableBytes: Number(file?.['file_bytes'] ?? 0),
    indexBytes: undefined,
    autovacuumRuns: undefined,
    lastAutovacuum: undefined,
    horizonAgeXids: undefined,
    historyListLength: history === null ? undefined : Number(history[1]),
  };
}

/**
 * A transaction held open in another session with a snapshot taken, as a forgotten `BEGIN` in a
 * console or a long report would: PostgreSQL's vacuum may not remove any row version the
 * snapshot could still see, InnoDB's purge may not discard undo it could still read.
 */
export class HeldSnapshot {
  readonly #driver: Driver;
  readonly #connection: Connection;

  private constructor(driver: Driver, connection: Connection) {
    this.#driver = driver;
    this.#connection = connection;
  }

  static async open(stand: Stand, db: TestDatabase, tableName: string): Promise<HeldSnapshot> {
    const driver = await db.openDriver({ poolSize: 1 });
    const connection = await driver.acquire();
    const statements =
      stand.kind === 'postgres'
        ? ['BEGIN ISOLATION LEVEL REPEATABLE READ', `SELECT COUNT(*) AS n FROM ${tableName}`]
        : ['SET TRANSACTION ISOLATION LEVEL REPEATABLE READ', 'START TRANSACTION WITH CONSISTENT SNAPSHOT', `SELECT COUNT(*) AS n FROM ${tableName}`];
    for (const [index, sql] of statements.entries()) {
      await connection.execute({ name: `soak.snapshot.${index}`, sql, values: [] });
    }
    return new HeldSnapshot(driver, connection);
  }

  async release(): Promise<void> {
    await this.#connection.execute({ name: 'soak.snapshot.rollback', sql: 'ROLLBACK', values: [] });
    this.#connection.release();
    await this.#driver.close();
  }
}

function round(value: number | undefined): number | undefined {
  return value === undefined ? undefined : Math.round(value * 100) / 100;
}
