import { describe, expect, it } from 'vitest';
import { defineTable, DeclarationError, UnsupportedError, type QueueTable } from '../../src/index.js';
import { createDeferred, type Deferred } from '../../src/internal/deferred.js';
import type { Driver } from '../../src/driver/driver.js';
import {
  Collector,
  countRows,
  createBroker,
  createTable,
  formsOf,
  jobsDeclaration,
  statsOf,
  untilStats,
  waitForDatabase,
} from '../fixtures.js';
import { spawnLineProcess, type LineProcess } from '../processes/spawn-line-process.js';
import type { SuiteContext } from '../run-conformance.js';
import { fileURLToPath } from 'node:url';

const LIMITED_REPLICA = fileURLToPath(new URL('../processes/limited-replica.ts', import.meta.url));

function keyedLeaseTable(): QueueTable {
  return defineTable({ ...jobsDeclaration({ form: 'lease' }), partitionKey: 'customer' });
}

/** Handlers that park until the test lets them go, so the rows in work can be observed. */
class Gate {
  readonly started = new Collector<string>();
  readonly #releases: Deferred<void>[] = [];

  #isOpen = false;

  readonly handler = async (message: { id: string }): Promise<void> => {
    this.started.push(message.id);
    if (this.#isOpen) return;
    const release = createDeferred();
    this.#releases.push(release);
    await release.promise;
  };

  /** Lets every parked handler return, and every later one return at once. */
  open(): void {
    this.#isOpen = true;
    for (const release of this.#releases.splice(0)) release.resolve();
  }
}

/**
 * Reads the queue table's live leases over and over, each read right after the last, until
 * `done` holds: what the database says is in work, never what a broker counts. `sql` selects
 * `n` per row (the rows in work, or the rows in work of each key); the most of any sample wins.
 */
async function sampleUntil(
  driver: Driver,
  sql: string,
  done: () => Promise<boolean>,
  timeoutMs: number,
): Promise<{ samples: number; most: number }> {
  const deadline = Date.now() + timeoutMs;
  let samples = 0;
  let most = 0;
  for (;;) {
    for (let read = 0; read < 20; read += 1) {
      const rows = (await driver.execute({ name: 'test.sample', sql, values: [new Date()] })).rows;
      for (const row of rows) most = Math.max(most, Number(row['n']));
      samples += 1;
    }
    if (await done()) return { samples, most };
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms; ${samples} samples, most in work ${most}`);
  }
}

export function concurrencySuite(context: SuiteContext): void {
  describe('concurrency limits', () => registerConcurrencyTests(context));
}

function registerConcurrencyTests(context: SuiteContext): void {
  const { stand } = context;
  const marks = (count: number) => Array.from({ length: count }, (_, index) => (stand.kind === 'postgres' ? `$${index + 1}` : '?')).join(', ');

  if (formsOf(stand).includes('rowLock')) {
    it('refuses concurrency limits on a row lock table at start, naming the lease form', async () => {
      const table = defineTable(jobsDeclaration({ form: 'rowLock' }));
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => undefined, { concurrency: { global: 2 } });
      const error: unknown = await broker.start().catch((failure: unknown) => failure);
      expect(error).toBeInstanceOf(UnsupportedError);
      expect((error as Error).message).toMatch(/need the lease form.*declare a lockedUntil column/);
    });
  }

  it('refuses perKey on a table without a partition key, and limits that are not whole numbers', async () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    await createTable(stand, context.db, table);
    const broker = createBroker(context.db, context.brokers);
    broker.subscribe(table.queue('emails'), () => undefined, { concurrency: { perKey: 1 } });
    const error: unknown = await broker.start().catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(DeclarationError);
    expect((error as Error).message).toMatch(/perKey counts rows in work by partition key; declare partitionKey/);
    const other = createBroker(context.db, context.brokers);
    expect(() => other.subscribe(table.queue('emails'), () => undefined, { concurrency: { global: 0 } })).toThrow(
      /concurrency.global must be a whole number of rows from 1/,
    );
  });

  it('two brokers with global: 2 hold two rows between them; the others wait until one settles', async () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    await createTable(stand, context.db, table);
    const queue = table.queue('emails');
    const gate = new Gate();
    const brokers = [createBroker(context.db, context.brokers), createBroker(context.db, context.brokers)];
    for (const broker of brokers) broker.subscribe(queue, gate.handler, { workers: 3, concurrency: { global: 2 } });
    const publisher = createBroker(context.db, context.brokers);
    await publisher.start();
    await publisher.publishMany(queue, Array.from({ length: 6 }, (_, index) => ({ payload: index })));
    for (const broker of brokers) await broker.start();
    await gate.started.waitFor(2);
    // Each broker claims again after the rows were taken, and finds the limit reached.
    for (const broker of brokers) await untilStats(broker, queue, (stats) => stats.emptyClaims >= 2, 'claims that found the limit reached');
    expect(gate.started.items).toHaveLength(2);
    expect(await countRows(context.db, 'jobs', 'locked_until IS NOT NULL')).toBe(2);
    expect(statsOf(brokers[0]!, queue).concurrency).toEqual({ global: 2, perKey: undefined });
    gate.open();
    await gate.started.waitFor(6);
    await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
  });

  if (!stand.capabilities.supportsProcesses) return;

  it('four replica processes with global: 3 never have more than 3 rows in work, and handle every row', async () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    await createTable(stand, context.db, table);
    await context.db.exec('CREATE TABLE effects (id VARCHAR(64) NOT NULL, customer VARCHAR(64), pid INTEGER NOT NULL)');
    const rowCount = 1_200;
    const publisher = createBroker(context.db, context.brokers);
    await publisher.start();
    await publisher.publishMany(table.queue('emails'), Array.from({ length: rowCount }, (_, index) => ({ payload: index })));
    const config = {
      database: context.db.url,
      table: jobsDeclaration({ form: 'lease' }),
      queue: 'emails',
      workers: 4,
      concurrency: { global: 3 },
      recordSql: `INSERT INTO effects (id, customer, pid) VALUES (${marks(3)})`,
      handlerMs: 2,
    };
    const replicas = Array.from({ length: 4 }, () => spawnReplica(config));
    const driver = await context.db.openDriver({ poolSize: 1 });
    try {
      await Promise.all(replicas.map((replica) => replica.ready));
      const { samples, most } = await sampleUntil(
        driver,
        `SELECT COUNT(*) AS n FROM jobs WHERE locked_until > ${marks(1)}`,
        async () => (await countRows(context.db, 'jobs')) === 0,
        120_000,
      );
      expect(most).toBeLessThanOrEqual(3);
      expect(most).toBeGreaterThan(0);
      expect(samples).toBeGreaterThan(100);
      expect(await countRows(context.db, '(SELECT DISTINCT id FROM effects) AS handled')).toBe(rowCount);
      // Every replica took a share: the limit is shared, not won by one process.
      const pids = await context.db.query<{ pid: unknown }>('SELECT DISTINCT pid FROM effects');
      expect(pids.length).toBeGreaterThan(1);
    } finally {
      await driver.close();
      await stopReplicas(replicas);
    }
  });

  it('perKey: 1 holds across three replica processes, also while a SIGKILLed replica\'s rows wait out their lease', async () => {
    const table = keyedLeaseTable();
    await createTable(stand, context.db, table);
    await context.db.exec('CREATE TABLE effects (id VARCHAR(64) NOT NULL, customer VARCHAR(64), pid INTEGER NOT NULL)');
    const keys = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];
    const rowCount = 360;
    const publisher = createBroker(context.db, context.brokers);
    await publisher.start();
    await publisher.publishMany(
      table.queue('emails'),
      Array.from({ length: rowCount }, (_, index) => ({ payload: index, partitionKey: keys[index % keys.length]! })),
    );
    const config = {
      database: context.db.url,
      table: { ...jobsDeclaration({ form: 'lease' }), partitionKey: 'customer' },
      queue: 'emails',
      workers: 4,
      concurrency: { perKey: 1 },
      recordSql: `INSERT INTO effects (id, customer, pid) VALUES (${marks(3)})`,
      handlerMs: 5,
      leaseMs: 1_000,
    };
    const replicas = Array.from({ length: 3 }, () => spawnReplica(config));
    const driver = await context.db.openDriver({ poolSize: 1 });
    try {
      await Promise.all(replicas.map((replica) => replica.ready));
      const victim = replicas[0]!;
      await victim.itemsAtLeast(20);
      victim.child.kill('SIGKILL');
      await victim.exited;
      const { samples, most } = await sampleUntil(
        driver,
        `SELECT customer, COUNT(*) AS n FROM jobs WHERE locked_until > ${marks(1)} GROUP BY customer`,
        async () => (await countRows(context.db, 'jobs')) === 0,
        120_000,
      );
      expect(most).toBe(1);
      expect(samples).toBeGreaterThan(100);
      expect(await countRows(context.db, '(SELECT DISTINCT id FROM effects) AS handled')).toBe(rowCount);
    } finally {
      await driver.close();
      await stopReplicas(replicas);
    }
  });
}

function spawnReplica(config: Record<string, unknown>): LineProcess<string> {
  return spawnLineProcess({ script: LIMITED_REPLICA, config, label: 'limited replica', prefix: 'handling ', parse: (id) => id });
}

async function stopReplicas(replicas: readonly LineProcess<string>[]): Promise<void> {
  for (const replica of replicas) if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGTERM');
  await Promise.all(replicas.map((replica) => replica.exited));
}
