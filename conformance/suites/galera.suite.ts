import { describe, expect, it } from 'vitest';
import { testHooksOf } from '../../src/broker/broker.js';
import { createDriver } from '../../src/driver/create-driver.js';
import { defineTable, UnsupportedError, type Broker, type Queue, type QueueError } from '../../src/index.js';
import { untilSignalled } from '../../src/internal/test-signal.js';
import {
  Collector,
  countRows,
  createBroker,
  createTable,
  jobsDeclaration,
  jobsTable,
  statsOf,
  untilStats,
  waitForDatabase,
} from '../fixtures.js';
import { skipTestWhenMissing } from '../require-live.js';
import type { SuiteContext } from '../run-conformance.js';
import { galeraCluster } from '../stands/galera-stand.js';
import { urlWithDatabase } from '../stands/test-database-name.js';
import { advisoryTable } from './advisory-tables.js';

const WORKERS = 4;
/** Rows drained by a broker on each node: enough that their claims meet on the same rows. */
const SPREAD_ROWS = 300;
const FIFO_GROUPS = ['a', 'b', 'c'];
const FIFO_ROWS_PER_GROUP = 20;
/** Rows of the drain a node is killed in; the kill comes once a quarter of them were handled. */
const KILL_ROWS = 400;
const KILLED_NODE = 3;
/** Short leases, so the killed node's brokers' rows come back within the test. */
const KILL_LEASE_MS = 2_000;
/** Rows published through the restarted node, which only its own broker is left to handle. */
const AFTER_RESTART_ROWS = 20;

/**
 * What a Galera cluster changes (the galera stand): every node found to be one; the advisory lock
 * form refused, and the row lock form unless one writer node is declared; the lease form on all
 * three nodes at once, each message handled once while claims meet on the same rows and conflicts
 * are retried; a settlement rolled back by a conflict run again (lease) or its claim handled again
 * (row lock); and a node killed with SIGKILL in the middle of a drain losing nothing, its broker
 * claiming again once the node is back.
 */
export function galeraSuite(context: SuiteContext, nodeUrls: readonly string[]): void {
  const { stand } = context;
  /** The test database's URL on each node, the stand's own first. */
  const urlsOnNodes = () => nodeUrls.map((nodeUrl) => urlWithDatabase(nodeUrl, new URL(context.db.url!).pathname.slice(1)));

  describe('on a Galera cluster', () => {
    it('a driver on each node finds a node of a Galera cluster', async () => {
      for (const url of urlsOnNodes()) {
        const driver = createDriver(url, { poolSize: 1 });
        try {
          await driver.open();
          expect(driver.isGaleraNode, url).toBe(true);
        } finally {
          await driver.close();
        }
      }
    });

    it('start() refuses the advisory lock form: GET_LOCK is the node’s own', async () => {
      const table = advisoryTable();
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => undefined);
      const failure = (await broker.start().catch((error: unknown) => error)) as QueueError;
      expect(failure).toBeInstanceOf(UnsupportedError);
      expect(failure).toMatchObject({ database: 'galera', feature: 'advisory' });
      expect(failure.message).toMatch(/GET_LOCK takes a lock on the node that runs it .*Use the lease form/);
    });

    it('start() refuses the row lock form unless every broker writes through one node', async () => {
      const table = jobsTable({ form: 'rowLock' });
      await createTable(stand, context.db, table);
      for (const galera of [undefined, { singleWriter: false }]) {
        const broker = createBroker(context.db, context.brokers, { galera });
        broker.subscribe(table.queue('emails'), () => undefined);
        const failure = (await broker.start().catch((error: unknown) => error)) as QueueError;
        expect(failure).toBeInstanceOf(UnsupportedError);
        expect(failure).toMatchObject({ database: 'galera', feature: 'rowLock' });
        expect(failure.message).toMatch(/declare galera: \{ singleWriter: true \} when every broker of these tables writes through one node/);
      }
      const broker = createBroker(context.db, context.brokers, { galera: { singleWriter: true } });
      broker.subscribe(table.queue('emails'), () => undefined);
      await broker.start();
    });

    it(`lease: a broker on each of the three nodes, ${WORKERS} workers each, handles every message once`, async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue<number>('emails');
      const handled = new Collector<number>();
      const errors: unknown[] = [];
      const brokers = urlsOnNodes().map((database) => {
        const broker = createBroker(context.db, context.brokers, { database, galera: { singleWriter: false } });
        broker.on('error', (error) => errors.push(error));
        broker.subscribe(queue, (message) => handled.push(message.payload), { workers: WORKERS });
        return broker;
      });
      await Promise.all(brokers.map((broker) => broker.start()));
      const perNode = SPREAD_ROWS / brokers.length;
      await Promise.all(
        brokers.map((broker, node) =>
          broker.publishMany(queue, Array.from({ length: perNode }, (_, index) => ({ payload: node * perNode + index }))),
        ),
      );
      await untilAcked(brokers, [queue], SPREAD_ROWS);
      const stats = brokers.map((broker) => statsOf(broker, queue));
      console.log(
        `galera: ${SPREAD_ROWS} rows acked by node ${stats.map((each) => each.acked).join(', ')}; ` +
          `conflicts retried ${stats.map((each) => each.deadlocksRetried).join(', ')}`,
      );
      expect(errors).toEqual([]);
      // The claims met on the same rows: 13 to 32 conflicts per broker in every run here.
      expect(stats.reduce((sum, each) => sum + each.deadlocksRetried, 0)).toBeGreaterThan(0);
      expect([...handled.items].sort((a, b) => a - b)).toEqual(Array.from({ length: SPREAD_ROWS }, (_, index) => index));
      expect(stats.map((each) => each.leasesLost + each.settleErrors)).toEqual([0, 0, 0]);
      // Node 1 applies the other nodes' deletes after they commit (certified, applied a moment later).
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'no row left, as node 1 sees it');
    });

    it('lease FIFO groups: brokers on the three nodes keep each group in claim order, one row of it in work at a time', async () => {
      const table = defineTable({ ...jobsDeclaration({ form: 'lease' }), group: { column: 'queue', fifo: true } });
      await createTable(stand, context.db, table);
      const queues = FIFO_GROUPS.map((group) => table.queue<number>(group));
      const started = new Map<string, number[]>(FIFO_GROUPS.map((group) => [group, []]));
      const inWork = new Map<string, number>(FIFO_GROUPS.map((group) => [group, 0]));
      let mostInOneGroup = 0;
      const errors: unknown[] = [];
      const brokers = urlsOnNodes().map((database) => {
        const broker = createBroker(context.db, context.brokers, { database, galera: { singleWriter: false } });
        broker.on('error', (error) => errors.push(error));
        for (const queue of queues) {
          const group = queue.group!;
          broker.subscribe(
            queue,
            async (message) => {
              inWork.set(group, inWork.get(group)! + 1);
              mostInOneGroup = Math.max(mostInOneGroup, inWork.get(group)!);
              started.get(group)!.push(message.payload);
              // A turn of the event loop, so a second row of the group could start meanwhile.
              await new Promise((resolve) => setImmediate(resolve));
              inWork.set(group, inWork.get(group)! - 1);
            },
            { workers: 2 },
          );
        }
        return broker;
      });
      await Promise.all(brokers.map((broker) => broker.start()));
      for (const queue of queues) {
        await brokers[0]!.publishMany(queue, Array.from({ length: FIFO_ROWS_PER_GROUP }, (_, index) => ({ payload: index })));
      }
      await untilAcked(brokers, queues, FIFO_GROUPS.length * FIFO_ROWS_PER_GROUP);
      expect(errors).toEqual([]);
      expect(mostInOneGroup).toBe(1);
      for (const group of FIFO_GROUPS) {
        expect(started.get(group), group).toEqual(Array.from({ length: FIFO_ROWS_PER_GROUP }, (_, index) => index));
      }
    });

    it('lease: a settlement rolled back by a conflict runs again and settles its row once', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      await failDeletesWithConflict(context, 2);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const handled = new Collector<string>();
      broker.subscribe(queue, (message) => handled.push(message.id), { coalesceSettlements: false });
      await broker.start();
      await broker.publish(queue, {});
      await untilStats(broker, queue, (stats) => stats.acked === 1, 'the ack settled');
      expect(statsOf(broker, queue)).toMatchObject({ acked: 1, settleErrors: 0, deadlocksRetried: 2, leasesLost: 0 });
      expect(handled.items).toHaveLength(1);
      expect(await conflictsLeft(context)).toBe(0);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it('row lock: a settlement rolled back by a conflict rolls its claim back, and the row is handled again', async () => {
      const table = jobsTable({ form: 'rowLock' });
      await createTable(stand, context.db, table);
      await failDeletesWithConflict(context, 1);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const errors: unknown[] = [];
      broker.on('error', (error) => errors.push(error));
      const attempts = new Collector<number>();
      broker.subscribe(queue, (message) => attempts.push(message.attempt));
      await broker.start();
      await broker.publish(queue, {});
      await untilStats(broker, queue, (stats) => stats.acked === 1 && stats.settleErrors === 1, 'the second ack settled');
      // The claim's attempt was rolled back with it: the row comes back as it was.
      expect(attempts.items).toEqual([1, 1]);
      expect(errors).toEqual([expect.objectContaining({ errno: 1213 })]);
      expect(await countRows(context.db, 'jobs')).toBe(0);
    });

    it(`a node killed with SIGKILL mid-drain loses nothing, and its broker claims again once the node is back`, async (test) => {
      const pid = await galeraCluster.pidOf(KILLED_NODE);
      skipTestWhenMissing(
        test,
        pid === undefined ? `node ${KILLED_NODE} is not a process of the cluster scripts/galera-cluster.sh started` : undefined,
      );
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue<number>('emails');
      const handled = new Collector<number>();
      const brokers = urlsOnNodes().map((database) => {
        const broker = createBroker(context.db, context.brokers, { database, leaseMs: KILL_LEASE_MS, galera: { singleWriter: false } });
        // The killed node's broker reports its lost sessions and failed claims until the node is back.
        broker.on('error', () => undefined);
        broker.subscribe(queue, (message) => handled.push(message.payload), { workers: WORKERS });
        return broker;
      });
      const killedNodeBroker = brokers[KILLED_NODE - 1]!;
      await Promise.all(brokers.map((broker) => broker.start()));
      await brokers[0]!.publishMany(queue, Array.from({ length: KILL_ROWS }, (_, index) => ({ payload: index })));
      await handled.waitFor(KILL_ROWS / 4);
      process.kill(pid!, 'SIGKILL');
      // The node starts again while the others drain: it rejoins once they have declared its old
      // self gone, and the rest of the run has its cluster back whatever this test finds.
      const restarted = galeraCluster.start();
      try {
        // Rows the killed node's broker held come back once their leases run out.
        await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 60_000, 'every row settled');
        expect(new Set(handled.items)).toEqual(new Set(Array.from({ length: KILL_ROWS }, (_, index) => index)));
      } finally {
        await restarted;
      }
      await Promise.all(brokers.filter((broker) => broker !== killedNodeBroker).map((broker) => broker.stop()));
      const ackedBefore = statsOf(killedNodeBroker, queue).acked;
      await killedNodeBroker.publishMany(queue, Array.from({ length: AFTER_RESTART_ROWS }, (_, index) => ({ payload: KILL_ROWS + index })));
      await untilStats(
        killedNodeBroker,
        queue,
        (stats) => stats.acked === ackedBefore + AFTER_RESTART_ROWS,
        'the restarted node’s broker handled what was published through it',
        30_000,
      );
      // Node 1 applies the other nodes' deletes after they commit (certified, applied a moment later).
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'no row left, as node 1 sees it');
    });
  });
}

/** Waits until the brokers' subscriptions of `queues` acked `count` rows together. */
function untilAcked(brokers: readonly Broker[], queues: readonly Queue<unknown>[], count: number): Promise<void> {
  const acked = () => brokers.reduce((sum, broker) => sum + queues.reduce((inBroker, queue) => inBroker + statsOf(broker, queue).acked, 0), 0);
  return untilSignalled(
    brokers.flatMap((broker) => queues.flatMap((queue) => testHooksOf(broker, queue).all())),
    () => acked() === count,
    `${count} rows acked`,
    30_000,
  ).catch((error: unknown) => {
    throw new Error(`${(error as Error).message}; acked ${acked()}`);
  });
}

/**
 * The next `times` deletes from the jobs table on the stand's node fail as a Galera conflict does
 * (errno 1213, SQLSTATE 40001), from a trigger: nothing else makes a certification failure happen
 * at a chosen statement. The count is in a MEMORY table, which the failed statement's rollback
 * leaves as it wrote it.
 */
async function failDeletesWithConflict(context: SuiteContext, times: number): Promise<void> {
  await context.db.exec(`CREATE TABLE conflicts_left (n INT NOT NULL PRIMARY KEY) ENGINE = MEMORY`);
  await context.db.exec(`INSERT INTO conflicts_left (n) VALUES (${times})`);
  await context.db.exec(
    `CREATE TRIGGER jobs_conflict BEFORE DELETE ON jobs FOR EACH ROW
     BEGIN
       IF (SELECT n FROM conflicts_left) > 0 THEN
         UPDATE conflicts_left SET n = n - 1;
         SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'Deadlock found when trying to get lock; try restarting transaction';
       END IF;
     END`,
  );
}

async function conflictsLeft(context: SuiteContext): Promise<number> {
  const [row] = await context.db.query<{ n: unknown }>('SELECT n FROM conflicts_left');
  return Number(row?.n);
}
