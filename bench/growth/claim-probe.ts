import { setTimeout as sleep } from 'node:timers/promises';
import type { QueueTable } from '../../src/definition/define-table.js';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Connection, Driver } from '../../src/driver/driver.js';
import { bindStatement, type BoundStatement } from '../../src/statement.js';
import { roleColumns } from '../../src/table/table-spec.js';
import type { BenchDatabase } from '../bench-database.js';
import { percentile } from '../statistics.js';

/**
 * Four probes a second: about 200 claim timings over a drain of 50,000 messages at 4,000 msg/s,
 * enough for a p99 that is not just the largest of a handful, at the cost of four claims a second
 * that the drain's own claims skip (they skip locked rows) and that roll back.
 */
const PROBE_EVERY_MS = 250;
const PROBE_LEASE_MS = 30_000;

/** The claim statement's time while a drain runs, and on PostgreSQL what its scan read. */
export interface ClaimTiming {
  readonly probes: number;
  readonly p50Ms: number | undefined;
  readonly p99Ms: number | undefined;
  /** PostgreSQL: buffers (8 kB pages, hit or read) the claim's scan touched, median over the probes. */
  readonly pagesP50: number | undefined;
  /** PostgreSQL: of those, the pages not in shared buffers (read from the operating system's cache or the disk), median. */
  readonly pagesReadP50?: number | undefined;
  /** PostgreSQL: rows the claim's scan read and dropped by its filter (rows leased already, for one), median. */
  readonly rowsRemovedByFilterP50: number | undefined;
  /** PostgreSQL: the claim scan's node, e.g. `Index Scan using bench_jobs_claim_order`. */
  readonly scan: string | undefined;
}

interface ExplainNode {
  readonly 'Node Type'?: string;
  readonly 'Index Name'?: string;
  readonly 'Subplan Name'?: string;
  readonly 'Shared Hit Blocks'?: number;
  readonly 'Shared Read Blocks'?: number;
  readonly 'Rows Removed by Filter'?: number;
  readonly Plans?: ExplainNode[];
}

/**
 * Runs the table's own lease claim, as the dialect renders it for the broker, on a connection of
 * its own every 250 ms while a drain runs, and rolls it back, so the drain loses no row. On
 * PostgreSQL the claim runs under EXPLAIN (ANALYZE, BUFFERS) and the server's execution time is
 * taken; MariaDB's claim is its locking select (timed around the call, after the transaction's
 * opening statements; on a FIFO table with the guard before it); SQLite's is the claiming UPDATE inside BEGIN IMMEDIATE (timed after the
 * write lock is held, so waiting for the drain's writes is not counted).
 */
export class ClaimProbe {
  readonly #database: BenchDatabase;
  readonly #driver: Driver;
  readonly #table: QueueTable;
  readonly #group: string;
  readonly #limit: number;
  readonly #timings: number[] = [];
  readonly #pages: number[] = [];
  readonly #pagesRead: number[] = [];
  readonly #removed: number[] = [];
  #scan: string | undefined;
  #running: Promise<void> | undefined;
  #isStopping = false;
  #failure: unknown;

  private constructor(database: BenchDatabase, table: QueueTable, group: string, limit: number) {
    this.#database = database;
    this.#driver = createDriver(database.url, { poolSize: 1 });
    this.#table = table;
    this.#group = group;
    this.#limit = limit;
  }

  /** `limit`: the rows the broker's claims ask for (one, a batch, or a prefetch buffer). */
  static async start(database: BenchDatabase, table: QueueTable, group: string, limit: number): Promise<ClaimProbe> {
    const probe = new ClaimProbe(database, table, group, limit);
    await probe.#driver.open();
    probe.#running = probe.#loop().catch((error: unknown) => {
      probe.#failure = error;
    });
    return probe;
  }

  async stop(): Promise<ClaimTiming> {
    this.#isStopping = true;
    await this.#running;
    await this.#driver.close();
    if (this.#failure !== undefined && this.#timings.length === 0) throw this.#failure;
    return {
      probes: this.#timings.length,
      p50Ms: percentile(this.#timings, 50),
      p99Ms: percentile(this.#timings, 99),
      pagesP50: percentile(this.#pages, 50),
      pagesReadP50: percentile(this.#pagesRead, 50),
      rowsRemovedByFilterP50: percentile(this.#removed, 50),
      scan: this.#scan,
    };
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
    const spec = this.#table.spec;
    const claim = createDialect(this.#database.name).lease.claim(spec, roleColumns(spec));
    const now = new Date();
    const values = { group: this.#group, now, leaseNow: now, limit: this.#limit, lockedUntil: new Date(now.getTime() + PROBE_LEASE_MS) };
    const rollback: BoundStatement = { name: 'growth.probe.rollback', sql: 'ROLLBACK', values: [] };
    if (claim.kind === 'single' && this.#database.name === 'postgres') {
      const statement = bindStatement(claim.statement, values);
      await connection.execute({ name: 'growth.probe.begin', sql: 'BEGIN', values: [] });
      try {
        const explained = { name: 'growth.probe.explain', sql: `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement.sql}`, values: statement.values };
        const { rows } = await connection.execute(explained);
        this.#recordPlan(rows[0]);
      } finally {
        await connection.execute(rollback);
      }
      return;
    }
    if (claim.kind === 'single') {
      await connection.execute({ name: 'growth.probe.begin', sql: 'BEGIN IMMEDIATE', values: [] });
      try {
        this.#timings.push(await timed(() => connection.execute(bindStatement(claim.statement, values))));
      } finally {
        await connection.execute(rollback);
      }
      return;
    }
    for (const statement of claim.begin) await connection.execute(bindStatement(statement, values));
    try {
      const guard = claim.guard;
      const guarded = async () => {
        if (guard !== undefined) await connection.execute(bindStatement(guard, values));
        await connection.execute(bindStatement(claim.select, values));
      };
      this.#timings.push(await timed(guarded));
    } finally {
      await connection.execute(rollback);
    }
  }

  #recordPlan(row: Record<string, unknown> | undefined): void {
    const cell = Object.values(row ?? {})[0];
    const [explained] = (typeof cell === 'string' ? JSON.parse(cell) : cell) as [{ 'Execution Time': number; Plan: ExplainNode }];
    const claimed = findNode(explained.Plan, (node) => node['Subplan Name'] === 'CTE tablequeue_claimed');
    const scan = claimed === undefined ? undefined : findNode(claimed, (node) => /Scan/.test(node['Node Type'] ?? ''));
    this.#timings.push(explained['Execution Time']);
    this.#pages.push(claimed === undefined ? 0 : (claimed['Shared Hit Blocks'] ?? 0) + (claimed['Shared Read Blocks'] ?? 0));
    this.#pagesRead.push(claimed?.['Shared Read Blocks'] ?? 0);
    this.#removed.push(scan?.['Rows Removed by Filter'] ?? 0);
    if (scan !== undefined) this.#scan = `${scan['Node Type']}${scan['Index Name'] === undefined ? '' : ` using ${scan['Index Name']}`}`;
  }
}

function findNode(node: ExplainNode, isWanted: (node: ExplainNode) => boolean): ExplainNode | undefined {
  if (isWanted(node)) return node;
  for (const child of node.Plans ?? []) {
    const found = findNode(child, isWanted);
    if (found !== undefined) return found;
  }
  return undefined;
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const startedAt = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - startedAt) / 1e6;
}
