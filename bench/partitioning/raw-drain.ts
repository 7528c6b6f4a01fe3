import { DEFAULT_LEASE_MS } from '../../src/broker/broker-options.js';
import { LEASE_COMMITS, leaseExpiry } from '../../src/claim/lease-book.js';
import { createDialect } from '../../src/dialect/create-dialect.js';
import type { Dialect, LeaseSettleMany, TableColumns } from '../../src/dialect/dialect.js';
import { executeAll } from '../../src/driver/connection-scope.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Connection, Driver } from '../../src/driver/driver.js';
import type { AcquireOptions } from '../../src/driver/pool-gate.js';
import { powerOfTwoAtLeast } from '../../src/internal/power-of-two.js';
import { bindRepeated, bindStatement, type Statement } from '../../src/statement.js';
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
  /** Rows per claim statement. */
  readonly batch: number;
  readonly onHandled: () => void;
}

/**
 * The baseline: the dialect's own claim and settle statements, bound with `bindStatement` and run
 * through the same driver on a pool of the same size, by `workers` async loops that each claim
 * one row (or `run.batch` rows), settle it and repeat until a claim comes back empty. Nothing
 * else: no decoding, no counters, no lease renewals, no pool budget.
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
    const batch = run.batch ?? 1;
    const context: CycleContext = { driver, dialect, spec, columns, batch, onHandled: () => watch.recordHandled() };
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

/**
 * BEGIN, `SELECT … FOR UPDATE SKIP LOCKED` of one row (or a batch), the deletes (a batch's in
 * one statement where the dialect has one, padded to a power of two of ids as the service
 * renders it), COMMIT, all on one connection: the service's row lock claim transaction, with the
 * BEGIN sent with the claim and one row's delete with the COMMIT (`executeAll`), as it sends them.
 */
function createRowLockCycle(context: CycleContext): RawCycle {
  const { driver, dialect, spec, columns, batch, onHandled } = context;
  const begin = dialect.session.begin({ isolation: spec.isolation });
  const claim = dialect.rowLock.claim(spec, columns);
  const finish = dialect.settle.finish(spec, { fenced: false });
  const commit = dialect.session.commit();
  const boundBegin = begin.map((statement) => bindStatement(statement, {}));
  const boundCommit = bindStatement(commit, {});
  return async () => {
    const connection = await driver.acquire();
    try {
      const claimed = bindStatement(claim, { now: new Date(), limit: batch });
      const rows = (await executeAll(connection, [...boundBegin, claimed])).at(-1)!.rows;
      for (let index = 0; index < rows.length; index += 1) onHandled();
      const ids = rows.map((row) => row[spec.id.column]);
      if (ids.length > 1 && dialect.rowLock.finishMany !== undefined) {
        const finishMany = dialect.rowLock.finishMany(spec, powerOfTwoAtLeast(ids.length));
        await connection.execute(bindRepeated(finishMany, ids.map((id) => ({ id })), { now: new Date() }, 'id'));
        await connection.execute(boundCommit);
      } else if (ids.length === 1) {
        await executeAll(connection, [bindStatement(finish, { id: ids[0] }), boundCommit]);
      } else {
        for (const id of ids) await connection.execute(bindStatement(finish, { id }));
        await connection.execute(boundCommit);
      }
      connection.release();
      return rows.length > 0;
    } catch (error) {
      connection.destroy();
      throw error;
    }
  };
}

/**
 * The lease claim (one statement, or MySQL/MariaDB's select-then-stamp transaction) of one row or
 * a batch on one connection. One row is settled by the fenced delete naming its lease token; a
 * batch by the statement the service's settlement coalescing runs (`lease.settleMany`: every
 * row under its own token, padded to a power of two of rows as the service renders it). Every
 * loan asks for the commits the service's lease form asks for (`LEASE_COMMITS`: on a SQLite file,
 * `synchronous = NORMAL`), so the raw loop runs the same statements under the same commit rule.
 */
function createLeaseCycle(context: CycleContext): RawCycle {
  const { driver, dialect, spec, columns, batch, onHandled } = context;
  const claim = dialect.lease.claim(spec, columns);
  const commit = dialect.session.commit();
  const finish = dialect.settle.finish(spec, { fenced: true });
  const finishMany = batch > 1 ? createFinishMany(context) : undefined;
  return async () => {
    const now = new Date();
    const lockedUntil = leaseExpiry(now, DEFAULT_LEASE_MS);
    const values = { now, leaseNow: now, limit: batch, lockedUntil };
    const { rows, isTaken } = await withConnection(driver, async (connection) => {
      if (claim.kind === 'single') {
        return { rows: (await connection.execute(bindStatement(claim.statement, values))).rows, isTaken: false };
      }
      await runAll(connection, claim.begin);
      const selected = (await connection.execute(bindStatement(claim.select, values))).rows;
      if (selected.length > 1 && claim.stampAll !== undefined) {
        // The service's stamp of a whole claim, padded to a power of two as it pads.
        const stampAll = claim.stampAll(powerOfTwoAtLeast(selected.length));
        const stampRows = selected.map((row) => ({ id: row[spec.id.column] }));
        const { affectedRows } = await connection.execute(bindRepeated(stampAll, stampRows, values, 'id'));
        await connection.execute(bindStatement(commit, {}));
        return { rows: selected, isTaken: affectedRows < selected.length };
      }
      const stamped: Record<string, unknown>[] = [];
      for (const row of selected) {
        const stamp = bindStatement(claim.stamp, { ...values, id: row[spec.id.column] });
        if ((await connection.execute(stamp)).affectedRows > 0) stamped.push(row);
      }
      await connection.execute(bindStatement(commit, {}));
      return { rows: stamped, isTaken: stamped.length < selected.length };
    }, LEASE_COMMITS);
    for (let index = 0; index < rows.length; index += 1) onHandled();
    const ids = rows.map((row) => row[spec.id.column]);
    const settled =
      finishMany !== undefined && ids.length > 1
        ? await withConnection(driver, (connection) => finishMany(connection, ids, lockedUntil), LEASE_COMMITS)
        : (
            await Promise.all(
              ids.map((id) =>
                withConnection(
                  driver,
                  async (connection) => (await connection.execute(bindStatement(finish, { id, held: lockedUntil }))).affectedRows,
                  LEASE_COMMITS,
                ),
              ),
            )
          ).reduce((sum, deleted) => sum + deleted, 0);
    if (settled < ids.length) throw new Error(`${ids.length - settled} of ${ids.length} fenced deletes found another lease token`);
    // A row selected but not stamped was taken meanwhile: an error, not an empty queue.
    if (isTaken) throw new Error('the lease stamp found a selected row taken');
    return rows.length > 0;
  };
}

/** Finishes many leased rows in one statement (or MySQL/MariaDB's lock-then-write transaction); returns how many. */
type FinishMany = (connection: Connection, ids: readonly unknown[], held: Date) => Promise<number>;

function createFinishMany(context: CycleContext): FinishMany {
  const { dialect, spec, columns } = context;
  const rendered = new Map<number, LeaseSettleMany>();
  const renderFor = (count: number): LeaseSettleMany => {
    const rowCount = powerOfTwoAtLeast(count);
    let statement = rendered.get(rowCount);
    if (statement === undefined) {
      statement = dialect.lease.settleMany(spec, columns, { kind: 'finish', rowCount });
      if (statement === undefined) throw new Error(`the ${dialect.name} dialect has no statement that finishes many leases`);
      rendered.set(rowCount, statement);
    }
    return statement;
  };
  const commit = dialect.session.commit();
  return async (connection, ids, held) => {
    const settleMany = renderFor(ids.length);
    const bind = (statement: Statement) =>
      settleMany.rowParams === 'arrays'
        ? bindStatement(statement, { now: new Date(), ids: ids.map(String), helds: ids.map(() => held) })
        : bindRepeated(statement, ids.map((id) => ({ id, held })), { now: new Date() }, 'held');
    if (settleMany.kind === 'returning') return (await connection.execute(bind(settleMany.statement))).rows.length;
    await runAll(connection, settleMany.begin);
    const locked = (await connection.execute(bind(settleMany.lock))).rows.length;
    if (locked > 0) await connection.execute(bind(settleMany.write));
    await connection.execute(bindStatement(commit, {}));
    return locked;
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
async function withConnection<T>(driver: Driver, work: (connection: Connection) => Promise<T>, options?: AcquireOptions): Promise<T> {
  const connection = await driver.acquire(options);
  try {
    const result = await work(connection);
    connection.release();
    return result;
  } catch (error) {
    connection.destroy();
    throw error;
  }
}
