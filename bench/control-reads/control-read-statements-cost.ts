import { createDriver } from '../../src/driver/create-driver.js';
import type { Driver } from '../../src/driver/driver.js';
import { bindControlRead, queueKeysOf } from '../../src/broker/broker-control-read.js';
import { createControlReadStatements } from '../../src/dialect/control-read-statements.js';
import { createCancellationRecordStatements, parseCancellationsTable } from '../../src/dialect/cancellation-statements.js';
import { createQueueControlStatements, parseQueueControlsTable } from '../../src/dialect/queue-control-statements.js';
import { defineTable } from '../../src/index.js';
import { bindRepeated, bindStatement, type BoundStatement } from '../../src/statement.js';
import { createBenchDatabase, runSql } from '../bench-database.js';
import { serversFromEnvironment } from '../command-line.js';
import { median } from '../statistics.js';
import { cpuMillisecondsOf, mariadbProcessId } from './control-reads-benchmark.js';

const ROUNDS = 5;

/**
 * Each read alone, `repeats` times in a row on one connection, as one subscription made them
 * (the paused rows of its queue; the records of two ids in work) and as the broker's one read of
 * both for two queues: round trip and server CPU time per statement.
 */
export async function statementsPart(database: 'postgres' | 'mariadb', repeats: number): Promise<void> {
  const bench = await createBenchDatabase(database, serversFromEnvironment());
  const driver = createDriver(bench.url, { poolSize: 1 });
  try {
    await driver.open();
    const controlsTable = parseQueueControlsTable('tablequeue_queue_controls', database);
    const cancellationsTable = parseCancellationsTable('tablequeue_cancellations', database);
    const controls = createQueueControlStatements(database);
    const records = createCancellationRecordStatements(database);
    await runSql(driver, controls.createTable(controlsTable));
    await runSql(driver, records.createTable(cancellationsTable));
    const table = defineTable({ table: 'bench_jobs', id: 'id', group: 'queue', retryAfter: 'retry_after', attempt: 'attempt', payload: 'payload' });
    const queues = [table.queue('q0'), table.queue('q1')];
    // A few rows, one of them paused, as a running system would have.
    for (const name of ['q0', 'q1', 'other', '']) {
      await driver.execute(bindStatement(controls.resume(controlsTable), { 'column:queue_table': 'bench_jobs', 'column:queue_name': name }));
    }
    await driver.execute(bindStatement(controls.pause(controlsTable), { 'column:queue_table': 'bench_jobs', 'column:queue_name': 'other' }));
    await driver.execute(bindStatement(records.record(cancellationsTable), { 'column:queue_table': 'bench_jobs', 'column:row_id': '999' }));
    const ids = ['1', '2'];
    const pausedRows = bindStatement(controls.pausedRows(controlsTable), { 'column:queue_table': 'bench_jobs', 'column:queue_name': 'q0' });
    const find =
      records.idParams === 'array'
        ? bindStatement(records.find(cancellationsTable, ids.length), { 'column:queue_table': 'bench_jobs', ids })
        : bindRepeated(records.find(cancellationsTable, ids.length), ids.map((id) => ({ id })), { 'column:queue_table': 'bench_jobs' }, 'id');
    const both = bindControlRead(
      createControlReadStatements(database),
      { queueControls: controlsTable, cancellations: cancellationsTable },
      queueKeysOf(queues),
      [...ids, '3', '4'].map((id) => ['bench_jobs', id] as const),
    );
    const statPath = await serverStatPath(driver, database);
    const reads = [
      ['pause read (1 queue)', pausedRows],
      ['cancellations read (2 ids)', find],
      ['one read of both (2 queues, 4 ids)', both],
    ] as const;
    for (const [, statement] of reads) for (let warm = 0; warm < 50; warm += 1) await driver.execute(statement);
    // Interleaved rounds, each read's median reported: other work on the machine comes and goes.
    const results = reads.map(() => ({ roundTrip: [] as number[], serverCpu: [] as number[] }));
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const [index, [, statement]] of reads.entries()) {
        const { roundTripMicroseconds, serverCpuMicroseconds } = await measure(driver, statement, repeats, statPath);
        results[index]!.roundTrip.push(roundTripMicroseconds);
        results[index]!.serverCpu.push(serverCpuMicroseconds);
      }
    }
    console.log(`\n${database} statements alone, ${repeats} each on one connection, median of ${ROUNDS} interleaved rounds:`);
    for (const [index, [label]] of reads.entries()) {
      const { roundTrip, serverCpu } = results[index]!;
      console.log(`  ${label.padEnd(36)} round trip ${median(roundTrip)!.toFixed(0).padStart(4)} µs, server CPU ${median(serverCpu)!.toFixed(0).padStart(4)} µs`);
    }
  } finally {
    await driver.close();
    await bench.drop();
  }
}

async function measure(
  driver: Driver,
  statement: BoundStatement,
  repeats: number,
  statPath: string,
): Promise<{ roundTripMicroseconds: number; serverCpuMicroseconds: number }> {
  const cpuBefore = cpuMillisecondsOf(statPath);
  const startedAt = performance.now();
  for (let run = 0; run < repeats; run += 1) await driver.execute(statement);
  const elapsed = performance.now() - startedAt;
  const cpu = cpuMillisecondsOf(statPath) - cpuBefore;
  return { roundTripMicroseconds: (elapsed / repeats) * 1000, serverCpuMicroseconds: (cpu / repeats) * 1000 };
}

/** The /proc stat of the server process or thread that runs this driver's one session. */
async function serverStatPath(driver: Driver, database: 'postgres' | 'mariadb'): Promise<string> {
  if (database === 'postgres') {
    const [row] = await runSql(driver, 'SELECT pg_backend_pid() AS pid');
    return `/proc/${Number(row?.['pid'])}/stat`;
  }
  const [row] = await runSql(driver, 'SELECT TID AS tid FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()');
  return `/proc/${mariadbProcessId()}/task/${Number(row?.['tid'])}/stat`;
}
