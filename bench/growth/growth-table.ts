import { createDriver } from '../../src/driver/create-driver.js';
import type { Driver } from '../../src/driver/driver.js';
import { defineTable, type QueueTable } from '../../src/definition/define-table.js';
import { runSql, type BenchDatabase, type BenchDatabaseName } from '../bench-database.js';
import { BENCH_QUEUE_NAME, createBenchTable } from '../partitioning/bench-table.js';

/** The group column of the tables that hold many queues. */
const GROUP_COLUMN = 'queue_name';
const GROUPED_TABLE_NAME = 'bench_grouped_jobs';
const FIFO_TABLE_NAME = 'bench_fifo_jobs';

/** Rows per INSERT … SELECT: one statement per 100,000 rows keeps each transaction's undo small on MariaDB. */
const FILL_STATEMENT_ROWS = 100_000;

/**
 * The growth runs' tables: the suite's lease table (one queue, no group), the same roles with a
 * group column so that many queues share one table, or with FIFO groups (WP-11), where a claim
 * takes a group's head only while no row of the group is in work.
 */
export function growthTable(shape: 'single' | 'grouped' | 'fifo'): QueueTable {
  if (shape === 'single') return createBenchTable('lease');
  return defineTable({
    table: shape === 'fifo' ? FIFO_TABLE_NAME : GROUPED_TABLE_NAME,
    id: 'id',
    group: shape === 'fifo' ? { column: GROUP_COLUMN, fifo: true } : GROUP_COLUMN,
    retryAfter: 'retry_after',
    attempt: 'attempt',
    lockedUntil: 'locked_until',
    payload: 'payload',
  });
}

/** When the rows of one fill become due: an hour ago (due now), or a day from now (delayed). */
export type RowTiming = 'due' | 'delayed';

/** One block of rows a fill writes: how many, when due, and which queue (grouped tables). */
export interface FillBlock {
  readonly rows: number;
  readonly timing: RowTiming;
  /**
   * A grouped table's rows: every row in this queue, or spread round-robin over `groups` queues,
   * the first of them the benchmark's own queue (`bench`) and the others `g1`, `g2`, ….
   */
  readonly group?: string | { readonly groups: number };
}

/**
 * Creates the table with the DDL `createTableSql` renders and fills it on the server side, one
 * INSERT … SELECT over a generated series per 100,000 rows (PostgreSQL generate_series, MariaDB's
 * sequence engine, a recursive CTE on SQLite), so a table of ten million rows costs minutes, not
 * the hours of publishing it row by row. The table statement runs first and its indexes after
 * the fill, as a bulk load is done; then the planner's statistics (and on PostgreSQL the vacuum
 * that autovacuum would run after an insert this large, and a checkpoint), so no drain pays for
 * the load. Payloads are the JSON bytes the publisher writes (`{"n":…}`); each block's rows are
 * due in id order, a microsecond apart on the servers. `storage` (PostgreSQL): storage parameters
 * set on the table before the fill, e.g. `fillfactor=90`, to try a change of the DDL.
 */
export async function fillGrowthTable(database: BenchDatabase, table: QueueTable, blocks: readonly FillBlock[], storage?: string): Promise<void> {
  await withDriver(database, async (driver) => {
    const [createTable, ...createIndexes] = table.createTableSql(database.name);
    await runSql(driver, createTable!);
    if (storage !== undefined) await runSql(driver, `ALTER TABLE ${table.spec.qualifiedName} SET (${storage})`);
    let first = 1;
    for (const block of blocks) {
      for (let offset = 0; offset < block.rows; offset += FILL_STATEMENT_ROWS) {
        const count = Math.min(FILL_STATEMENT_ROWS, block.rows - offset);
        await runSql(driver, fillStatement(database.name, table, block, first, first + count - 1));
        first += count;
      }
    }
    for (const sql of createIndexes) await runSql(driver, sql);
    for (const sql of settleStatements(database.name, table.spec.qualifiedName)) await runSql(driver, sql);
  });
}

function fillStatement(database: BenchDatabaseName, table: QueueTable, block: FillBlock, from: number, to: number): string {
  const name = table.spec.qualifiedName;
  const isGrouped = table.spec.group !== undefined;
  const columns = isGrouped ? `(${quote(database, GROUP_COLUMN)}, retry_after, payload)` : '(retry_after, payload)';
  const groupOf = (n: string): string => {
    if (typeof block.group === 'string') return `'${block.group}'`;
    const groups = block.group?.groups ?? 1;
    const other = database === 'mariadb' ? `CONCAT('g', ${n} % ${groups})` : `'g' || (${n} % ${groups})`;
    return `CASE WHEN ${n} % ${groups} = 0 THEN '${BENCH_QUEUE_NAME}' ELSE ${other} END`;
  };
  const prefix = (n: string) => (isGrouped ? `${groupOf(n)}, ` : '');
  switch (database) {
    case 'postgres': {
      const base = block.timing === 'due' ? "now() - interval '1 hour'" : "now() + interval '1 day'";
      return (
        `INSERT INTO ${name} ${columns} SELECT ${prefix('n')}${base} + n * interval '1 microsecond', ` +
        `convert_to('{"n":' || n || '}', 'UTF8') FROM generate_series(${from}, ${to}) AS n`
      );
    }
    case 'mariadb': {
      const base = block.timing === 'due' ? 'UTC_TIMESTAMP(6) - INTERVAL 1 HOUR' : 'UTC_TIMESTAMP(6) + INTERVAL 1 DAY';
      return `INSERT INTO ${name} ${columns} SELECT ${prefix('seq')}${base} + INTERVAL seq MICROSECOND, CONCAT('{"n":', seq, '}') FROM seq_${from}_to_${to}`;
    }
    case 'sqlite': {
      const shift = block.timing === 'due' ? "'-1 hour'" : "'+1 day'";
      return (
        `WITH RECURSIVE series(n) AS (SELECT ${from} UNION ALL SELECT n + 1 FROM series WHERE n < ${to}) ` +
        `INSERT INTO ${name} ${columns} SELECT ${prefix('n')}strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', ${shift}), ` +
        `CAST('{"n":' || n || '}' AS BLOB) FROM series`
      );
    }
  }
}

function quote(database: BenchDatabaseName, name: string): string {
  return database === 'postgres' ? `"${name}"` : `\`${name}\``;
}

function settleStatements(database: BenchDatabaseName, table: string): string[] {
  switch (database) {
    case 'postgres':
      return [`VACUUM (ANALYZE) ${table}`, 'CHECKPOINT'];
    case 'mariadb':
      return [`ANALYZE TABLE ${table}`];
    case 'sqlite':
      return ['ANALYZE'];
  }
}

/** Drops the table, so that `fillGrowthTable` can fill it again. */
export async function dropGrowthTable(database: BenchDatabase, table: QueueTable): Promise<void> {
  await withDriver(database, (driver) => runSql(driver, `DROP TABLE ${table.spec.qualifiedName}`));
}

/** Rows in the table: the backlog left after a partial drain, or the check of a fill. */
export async function countRows(database: BenchDatabase, table: QueueTable): Promise<number> {
  return withDriver(database, async (driver) => {
    const [row] = await runSql(driver, `SELECT COUNT(*) AS counted FROM ${table.spec.qualifiedName}`);
    return Number(row?.counted);
  });
}

export async function withDriver<T>(database: BenchDatabase, work: (driver: Driver) => Promise<T>): Promise<T> {
  const driver = createDriver(database.url, { poolSize: 1 });
  await driver.open();
  try {
    return await work(driver);
  } finally {
    await driver.close();
  }
}
