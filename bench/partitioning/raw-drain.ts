import { DEFAULT_LEASE_MS } from '../../src/broker/broker-options.js';
import { leaseExpiry } from '../../src/claim/lease-book.js';
import { createDialect } from '../../src/dialect/create-dialect.js';
import type { Dialect, TableColumns } from '../../src/dialect/dialect.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Connection, Driver } from '../../src/driver/driver.js';
import { bindStatement, type Statement } from '../../src/statement.js';
import type { TableSpec } from '../../src/table/table-spec.js';
import { DrainWatch, settlesWithin, type DrainMeasurement, type DrainRun } from './drain-watch.js';

const CLOSE_GRACE_MS = 10_000;

/**
 * One pass of a raw loop: claim one row, count it handled, settle it. Resolves false when the
 * claim found no row.
 */
type RawCycle = () => Promise<boolean>;

interface CycleContext {
  readonly driver: Driver;
  readonly dialect: Dialect;
  readonly spec: TableSpec;
  readonly columns: TableColumns;
  readonly onHandled: () => void;
}

/**
 * The baseline: the dialect's own claim and settle statements, bound with `bindStatement` and run
 * through the same driver on a pool of the same size, by `workers` async loops that each claim
 * one row, settle it and repeat until a claim comes back empty. Nothing else: no decoding, no
 * counters, no lease renewals, no pool budget.
 */
export async function drainWithRawLoop(run: DrainRun): Promise<DrainMeasurement> {
  const watch = new DrainWatch(run.messages, run.signal);
  const driver = createDriver(run.database.url, { poolSize: run.workers + 2 });
  await driver.open();
  try {
    const dialect = createDialect(run.database.name);
    const spec = run.table.spec;
    const probe = bindStatement(dialect.schema.probeColumns(spec), {});
    const columns = (await driver.execute(probe)).columns;
    const context: CycleContext = { driver, dialect, spec, columns, onHandled: () => watch.recordHandled() };
    const cycle = spec.form === 'lease' ? createLeaseCycle(context) : createRowLockCycle(context);
    const claims = { claims: 0, emptyClaims: 0 };
    const loops = Promise.all(Array.from({ length: run.workers }, () => runLoop(cycle, watch, claims)));
    await Promise.race([loops, whenAborted(watch.cutSignal)]);
    // Cut short: loops stop at their next cycle; one stuck in a statement is left to the drop.
    if (watch.cutSignal.aborted) await settlesWithin(loops, CLOSE_GRACE_MS);
    return watch.measurement({ ...claims, maxConnectionsHeld: driver.stats().maxHeld });
  } finally {
    await settlesWithin(driver.close(), CLOSE_GRACE_MS);
  }
}

/** Repeats the cycle until a claim is empty or the run is cut short; an error is counted and the loop goes on. */
async function runLoop(cycle: RawCycle, watch: DrainWatch, counts: { claims: number; emptyClaims: number }): Promise<void> {
  while (!watch.cutSignal.aborted) {
    try {
      counts.claims += 1;
      if (!(await cycle())) {
        counts.emptyClaims += 1;
        return;
      }
    } catch (error) {
      watch.recordError(error);
    }
  }
}

/** BEGIN, `SELECT … FOR UPDATE SKIP LOCKED` of one row, the delete, COMMIT, all on one connection. */
function createRowLockCycle(context: CycleContext): RawCycle {
  const { driver, dialect, spec, columns, onHandled } = context;
  const begin = dialect.session.begin({ isolation: spec.isolation });
  const claim = dialect.rowLock.claim(spec, columns);
  const finish = dialect.settle.finish(spec, { fenced: false });
  const commit = dialect.session.commit();
  return async () => {
    const connection = await driver.acquire();
    try {
      await runAll(connection, begin);
      const [row] = (await connection.execute(bindStatement(claim, { now: new Date(), limit: 1 }))).rows;
      if (row !== undefined) {
        onHandled();
        await connection.execute(bindStatement(finish, { id: row[spec.id.column] }));
      }
      await connection.execute(bindStatement(commit, {}));
      connection.release();
      return row !== undefined;
    } catch (error) {
      connection.destroy();
      throw error;
    }
  };
}

/**
 * The lease claim (one statement, or MySQL/MariaDB's select-then-stamp transaction) on one
 * connection, then the fenced delete naming the lease token on another, as the service does.
 */
function createLeaseCycle(context: CycleContext): RawCycle {
  const { driver, dialect, spec, columns, onHandled } = context;
  const claim = dialect.lease.claim(spec, columns);
  const commit = dialect.session.commit();
  const finish = dialect.settle.finish(spec, { fenced: true });
  return async () => {
    const now = new Date();
    const lockedUntil = leaseExpiry(now, DEFAULT_LEASE_MS);
    const values = { now, leaseNow: now, limit: 1, lockedUntil };
    const { row, isTaken } = await withConnection(driver, async (connection) => {
      if (claim.kind === 'single') {
        return { row: (await connection.execute(bindStatement(claim.statement, values))).rows[0], isTaken: false };
      }
      await runAll(connection, claim.begin);
      const [selected] = (await connection.execute(bindStatement(claim.select, values))).rows;
      const stamp = selected && bindStatement(claim.stamp, { ...values, id: selected[spec.id.column] });
      const isStamped = stamp !== undefined && (await connection.execute(stamp)).affectedRows > 0;
      await connection.execute(bindStatement(commit, {}));
      return { row: isStamped ? selected : undefined, isTaken: selected !== undefined && !isStamped };
    });
    // A row selected but not stamped was taken meanwhile: an error, not an empty queue.
    if (isTaken) throw new Error('the lease stamp found the selected row taken');
    if (row === undefined) return false;
    onHandled();
    const id = row[spec.id.column];
    const deleted = await withConnection(driver, async (connection) => {
      return (await connection.execute(bindStatement(finish, { id, held: lockedUntil }))).affectedRows;
    });
    if (deleted === 0) throw new Error(`row ${String(id)}: the fenced delete found another lease token`);
    return true;
  };
}

function whenAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

async function runAll(connection: Connection, statements: readonly Statement[]): Promise<void> {
  for (const statement of statements) await connection.execute(bindStatement(statement, {}));
}

/** Acquire, work, release; a connection whose statement failed is destroyed, as the service does. */
async function withConnection<T>(driver: Driver, work: (connection: Connection) => Promise<T>): Promise<T> {
  const connection = await driver.acquire();
  try {
    const result = await work(connection);
    connection.release();
    return result;
  } catch (error) {
    connection.destroy();
    throw error;
  }
}
