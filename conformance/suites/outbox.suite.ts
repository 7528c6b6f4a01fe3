import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  defineDedupeTable,
  defineOutbox,
  defineTable,
  DestinationError,
  EncodeError,
  Outcome,
  OUTBOX_RECORD_ID_HEADER,
  queueDestination,
  type Broker,
  type Outbox,
  type OutboxDeclaration,
  type OutboxDestination,
  type OutboxRecord,
  type RelayTransaction,
} from '../../src/index.js';
import { createDeferred } from '../../src/internal/deferred.js';
import { testSignalsOfRelay } from '../../src/outbox/relay.js';
import {
  Collector,
  countRows,
  createBroker,
  createTable,
  formsOf,
  jobsDeclaration,
  jobsTable,
  placeholder,
  untilRelayed,
  untilStats,
  waitForDatabase,
} from '../fixtures.js';
import { spawnRelay } from '../processes/spawn-relay.js';
import { runCliHere } from '../../src/cli/run-cli.fixture.js';
import { BrokerDirectory } from '../../src/dashboard/broker-directory.js';
import { relaysOfTable } from '../../src/dashboard/queue-readers.js';
import type { SuiteContext } from '../run-conformance.js';
import type { Stand, TestDatabase } from '../stand.js';
import { openServiceWriters, type ServicePool, type ServiceTransaction } from './service-pools.js';

const OUTBOX: OutboxDeclaration = {
  table: 'outbox',
  id: 'id',
  name: 'name',
  payload: 'payload',
  headers: 'headers',
  processedAt: 'processed_at',
  lockedUntil: 'locked_until',
};

interface ReceivedRow {
  readonly record_id: string;
  readonly name: string;
  readonly payload: string;
  readonly relay: string;
}

/** The table the test destinations write what they receive into, in arrival order (`seq`). */
function receivedTableSql(stand: Stand): string {
  const seq = {
    postgres: 'BIGSERIAL PRIMARY KEY',
    mysql: 'BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY',
    sqlite: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  }[stand.kind];
  return `CREATE TABLE received (seq ${seq}, record_id VARCHAR(64) NOT NULL, name VARCHAR(255) NOT NULL, payload TEXT NOT NULL, relay VARCHAR(64) NOT NULL)`;
}

function receivedInsertSql(stand: Stand): string {
  const [a, b, c, d] = [1, 2, 3, 4].map((index) => placeholder(stand, index));
  return `INSERT INTO received (record_id, name, payload, relay) VALUES (${a}, ${b}, ${c}, ${d})`;
}

async function receivedRows(db: TestDatabase): Promise<ReceivedRow[]> {
  const rows = await db.query<ReceivedRow>('SELECT record_id, name, payload, relay FROM received ORDER BY seq');
  return rows.map((row) => ({ ...row, record_id: String(row.record_id) }));
}

/**
 * A real destination in the test: writes each record it receives into the received table, and
 * while `refusing` rejects every send before writing anything, until `recover()`.
 */
class RecordingDestination implements OutboxDestination {
  readonly description: string;
  readonly received = new Collector<OutboxRecord>();
  readonly refused = new Collector<number>();
  readonly #db: TestDatabase;
  readonly #insertSql: string;
  #isRefusing: boolean;

  constructor(context: { db: TestDatabase; stand: Stand }, label: string, options: { refusing?: boolean } = {}) {
    this.description = `received table (${label})`;
    this.#db = context.db;
    this.#insertSql = receivedInsertSql(context.stand);
    this.#isRefusing = options.refusing ?? false;
  }

  recover(): void {
    this.#isRefusing = false;
  }

  open(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  async send(records: readonly OutboxRecord[]): Promise<void> {
    if (this.#isRefusing) {
      this.refused.push(records.length);
      throw new DestinationError({ destination: this.description, message: 'refusing until the test recovers it' });
    }
    for (const record of records) {
      await this.#db.query(this.#insertSql, [record.id, record.name, record.payload.toString('utf8'), this.description]);
      this.received.push(record);
    }
  }
}

/** The errors the broker reports for failed sends of its relays (`phase: 'send'`). */
function sendErrorsOf(broker: Broker): Collector<unknown> {
  const sendErrors = new Collector<unknown>();
  broker.on('error', (error, detail) => {
    if (detail['phase'] === 'send') sendErrors.push(error);
  });
  return sendErrors;
}

/** The value of one series (name and labels, as the text format writes them) in the broker's metrics. */
function metricValue(broker: Broker, series: string): number | undefined {
  const line = broker.metrics().split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** The service's transaction. On a SQLite file its BEGIN IMMEDIATE meets the broker's writes (SQLITE_BUSY); a service retries it, as this does. */
async function beginServiceTransaction(pool: ServicePool): Promise<ServiceTransaction> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await pool.beginTransaction();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await delay(2);
    }
  }
}

async function writeRecords(
  pool: ServicePool,
  outbox: Outbox,
  records: readonly { name: string; payload: unknown }[],
  how: 'COMMIT' | 'ROLLBACK' = 'COMMIT',
): Promise<string[]> {
  const transaction = await beginServiceTransaction(pool);
  const ids: string[] = [];
  try {
    for (const record of records) ids.push(await outbox.write(transaction.connection, record.name, record.payload));
  } catch (error) {
    await transaction.finish('ROLLBACK');
    throw error;
  }
  await transaction.finish(how);
  return ids;
}

/** `count` records spread over `names` in turn, payload `<name>-<n>`. */
function recordsOver(names: readonly string[], count: number): { name: string; payload: string }[] {
  return Array.from({ length: count }, (_, index) => {
    const name = names[index % names.length]!;
    return { name, payload: `${name}-${index}` };
  });
}

/** For each name, the record ids in the order they arrived must be in id order. */
function expectIdOrderPerName(rows: readonly { record_id: string; name: string }[]): void {
  const byName = new Map<string, bigint[]>();
  for (const row of rows) byName.set(row.name, [...(byName.get(row.name) ?? []), BigInt(row.record_id)]);
  for (const [name, ids] of byName) {
    const sorted = [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    expect({ name, ids }).toEqual({ name, ids: sorted });
  }
}

async function unprocessedRecords(db: TestDatabase): Promise<number> {
  return countRows(db, 'outbox', 'processed_at IS NULL');
}

/** Transactional outbox: writes on the service's transaction, the relay, the queue destination, dedupe. */
export function outboxSuite(context: SuiteContext): void {
  const { stand } = context;
  const outbox = defineOutbox(OUTBOX);

  async function createOutboxTables(): Promise<void> {
    for (const sql of outbox.createTableSql(stand.ddlDialect)) await context.db.exec(sql);
    await context.db.exec(receivedTableSql(stand));
  }

  describe('outbox', () => {
    it('records written in a rolled-back transaction are never relayed; committed ones arrive once', async () => {
      await createOutboxTables();
      for (const pool of openServiceWriters(stand, context.db)) {
        // The broker keeps its own connections: a SQLite handle is one session, which a broker
        // sharing it would write into the service's open transaction.
        const broker = createBroker(context.db, context.brokers);
        try {
          const destination = new RecordingDestination(context, pool.label);
          // A relay that polls once a minute: the records arrive because the writes wake it.
          const relay = broker.relay(outbox, destination, { pollIntervalMs: 60_000 });
          await broker.start();
          const writer = broker.outbox(outbox);
          await writeRecords(pool, writer, [{ name: 'orders', payload: 'never' }], 'ROLLBACK');
          const committed = await writeRecords(pool, writer, [
            { name: 'orders', payload: 'kept' },
            { name: 'orders', payload: 'kept too' },
          ]);
          await destination.received.waitFor(2);
          await untilRelayed([relay], () => relay.stats().relayed === 2, 'two records marked processed');
          await broker.stop();
          const rows = await receivedRows(context.db);
          expect(rows.map((row) => [row.record_id, row.payload])).toEqual([
            [committed[0], JSON.stringify('kept')],
            [committed[1], JSON.stringify('kept too')],
          ]);
          expect(destination.received.items.map((record) => record.headers[OUTBOX_RECORD_ID_HEADER])).toEqual(committed);
          expect(await countRows(context.db, 'outbox')).toBe(2);
          expect(await unprocessedRecords(context.db)).toBe(0);
          await context.db.exec('DELETE FROM outbox');
          await context.db.exec('DELETE FROM received');
        } finally {
          await broker.stop();
          await pool.end();
        }
      }
    });

    it('a destination that refuses for a while and then recovers gets every record, once and in order per name', async () => {
      await createOutboxTables();
      const pool = openServiceWriters(stand, context.db)[0]!;
      try {
        const destination = new RecordingDestination(context, 'flaky', { refusing: true });
        const broker = createBroker(context.db, context.brokers);
        const sendErrors = sendErrorsOf(broker);
        const relay = broker.relay(outbox, destination, { batch: 4, retryBackoff: { initialMs: 200, maxMs: 1_000 } });
        await broker.start();
        const ids = await writeRecords(pool, broker.outbox(outbox), recordsOver(['a', 'b', 'c'], 18));
        // Four refusals: every name refused at least once, and a name sent again after its backoff.
        await destination.refused.waitFor(4);
        expect(await unprocessedRecords(context.db)).toBe(18);
        destination.recover();
        await destination.received.waitFor(18);
        await untilRelayed([relay], () => relay.stats().relayed === 18, 'every record marked processed');
        await broker.stop();
        const rows = await receivedRows(context.db);
        expect(rows.map((row) => row.record_id).sort()).toEqual([...ids].sort());
        expectIdOrderPerName(rows);
        expect(relay.stats().failedSends).toBeGreaterThanOrEqual(4);
        expect(sendErrors.items.length).toBe(relay.stats().failedSends);
        expect(sendErrors.items[0]).toBeInstanceOf(DestinationError);
        expect(await unprocessedRecords(context.db)).toBe(0);
        // The relay's counts in the broker's metrics, as a scrape reads them.
        const series = (name: string) => metricValue(broker, `${name}{outbox="outbox",destination="received table (flaky)"}`);
        expect(series('tablequeue_outbox_relayed_total')).toBe(18);
        expect(series('tablequeue_outbox_failed_sends_total')).toBe(relay.stats().failedSends);
        expect(series('tablequeue_outbox_sends_total')).toBe(relay.stats().sends);
        expect(series('tablequeue_outbox_names_waiting_to_retry')).toBe(0);
      } finally {
        await pool.end();
      }
    });

    it('lists the names a relay waits to send again, with the last error, in its stats, its heartbeat and tablequeue stats', async () => {
      await createOutboxTables();
      const pool = openServiceWriters(stand, context.db)[0]!;
      try {
        const destination = new RecordingDestination(context, 'down', { refusing: true });
        const broker = createBroker(context.db, context.brokers, { heartbeat: { table: 'tq_relay_brokers', intervalMs: 100 } });
        // Reported as the backoff begins, just before the name is listed as waiting.
        const sendErrors = sendErrorsOf(broker);
        // A backoff far longer than the test: each name fails once and then waits.
        const relay = broker.relay(outbox, destination, { retryBackoff: { initialMs: 600_000, maxMs: 600_000 } });
        await broker.start();
        const startedAt = Date.now();
        await writeRecords(pool, broker.outbox(outbox), recordsOver(['invoices', 'orders'], 4));
        await sendErrors.waitFor(2);
        const waiting = relay.stats().waitingNames;
        expect(waiting.map(({ name }) => name).sort()).toEqual(['invoices', 'orders']);
        for (const name of waiting) {
          expect(name.failedSends).toBe(1);
          expect(name.error).toBe('DestinationError: refusing until the test recovers it');
          expect(name.retryAt.getTime()).toBeGreaterThan(startedAt + 590_000);
        }

        // The broker's heartbeat carries the relay beside its subscriptions, as the operator tools read it.
        const driver = await context.db.openDriver({ poolSize: 1 });
        const directory = new BrokerDirectory({ driver, database: stand.kind, table: 'tq_relay_brokers' });
        const relays = async () => relaysOfTable(await directory.list(), { name: 'outbox' });
        await waitForDatabase(async () => (await relays())?.[0]?.waitingNames.length === 2, 10_000, 'the heartbeat to list both names');
        const [reported] = (await relays())!;
        expect(reported).toMatchObject({ destination: 'received table (down)', relayed: 0, failedSends: 2, namesWaitingToRetry: 2 });
        expect(reported!.waitingNames[0]!.retryInMs).toBeGreaterThan(500_000);
        expect(reported!.waitingNames[0]!.error).toMatch(/refusing until the test recovers it/);
        expect(relaysOfTable(await directory.list(), { name: 'jobs' })).toEqual([]);
        await driver.close();

        // The command line reads a database of its own: an in-memory one has no URL to give it.
        if (stand.capabilities.supportsProcesses) {
          const base = ['--database', context.db.url!, '--table', 'outbox', '--column', 'group=name', '--heartbeat-table', 'tq_relay_brokers'];
          // `TABLE:ROLE=NAME` says the same of the one table stats reads.
          const perTable = base.map((flag) => (flag === 'group=name' ? 'outbox:group=name' : flag));
          const [human, json] = await Promise.all([runCliHere(['stats', ...base]), runCliHere(['stats', ...perTable, '--json'])]);
          expect(human.stdout).toContain('relayed to received table (down) by ');
          expect(human.stdout).toMatch(
            /waiting: "invoices" after 1 failed send in a row, again in \d+m \d+s: DestinationError: refusing until the test recovers it/,
          );
          expect((JSON.parse(json.stdout) as { relays: unknown[] }).relays).toHaveLength(1);
        }
        await broker.stop();
      } finally {
        await pool.end();
      }
    });

    it('two relays at once never send a record twice, and each name still goes out in record order', async () => {
      await createOutboxTables();
      const pool = openServiceWriters(stand, context.db)[0]!;
      try {
        const destinations = [new RecordingDestination(context, 'first'), new RecordingDestination(context, 'second')];
        const relays = destinations.map((destination) => {
          const broker = createBroker(context.db, context.brokers);
          return { broker, relay: broker.relay(outbox, destination, { batch: 3, concurrency: 2 }) };
        });
        for (const { broker } of relays) await broker.start();
        const writer = relays[0]!.broker.outbox(outbox);
        const ids: string[] = [];
        for (let round = 0; round < 4; round += 1) ids.push(...(await writeRecords(pool, writer, recordsOver(['n1', 'n2', 'n3'], 15))));
        await untilRelayed(
          relays.map(({ relay }) => relay),
          () => relays.reduce((sum, { relay }) => sum + relay.stats().relayed, 0) >= ids.length,
          `${ids.length} records relayed`,
          30_000,
        );
        for (const { broker } of relays) await broker.stop();
        const rows = await receivedRows(context.db);
        expect(rows).toHaveLength(ids.length);
        expect(new Set(rows.map((row) => row.record_id)).size).toBe(ids.length);
        expectIdOrderPerName(rows);
        expect(relays.reduce((sum, { relay }) => sum + relay.stats().relayed, 0)).toBe(ids.length);
        expect(await unprocessedRecords(context.db)).toBe(0);
      } finally {
        await pool.end();
      }
    });

    // SQLite has no row locks: a transaction that writes holds the whole database.
    it.skipIf(stand.kind === 'sqlite')(
      'a record that another transaction holds locked holds back the records after it, and the ones before it still go',
      async () => {
        await createOutboxTables();
        const pool = openServiceWriters(stand, context.db)[0]!;
        const locker = await context.db.openDriver({ poolSize: 1 });
        const lock = await locker.acquire();
        try {
          const writer = createBroker(context.db, context.brokers);
          await writer.start();
          const ids = await writeRecords(pool, writer.outbox(outbox), recordsOver(['a'], 5));
          await writer.stop();
          const destination = new RecordingDestination(context, 'in order');
          const broker = createBroker(context.db, context.brokers);
          const relay = broker.relay(outbox, destination, { batch: 10, pollIntervalMs: 20 });
          // What a scan of another statement does for an instant on MariaDB, held here for as long as the test needs.
          await lock.execute({ name: 'test.begin', sql: stand.kind === 'postgres' ? 'BEGIN' : 'START TRANSACTION', values: [] });
          await lock.execute({ name: 'test.lock', sql: `SELECT id FROM outbox WHERE id = ${placeholder(stand, 1)} FOR UPDATE`, values: [ids[2]] });
          await broker.start();
          await destination.received.waitFor(2);
          // Two claims of the name after the first two records went: both found the third one held.
          const claims = testSignalsOfRelay(relay).claimed.turnOn();
          for (let claim = 0; claim < 2; claim += 1) await claims.next({ matches: (taken) => taken === 0, what: 'a claim that took nothing' });
          expect(destination.received.items.map((record) => record.id)).toEqual(ids.slice(0, 2));
          expect(relay.stats().relayed).toBe(2);

          await lock.execute({ name: 'test.rollback', sql: 'ROLLBACK', values: [] });
          await untilRelayed([relay], () => relay.stats().relayed === 5, 'every record relayed');
          await broker.stop();
          expect((await receivedRows(context.db)).map((row) => row.record_id)).toEqual(ids);
        } finally {
          lock.release();
          await locker.close();
          await pool.end();
        }
      },
    );

    it('into a queue on the same database: exactly once, even when the transaction that writes it fails once', async () => {
      await createOutboxTables();
      const form = formsOf(stand).at(-1)!;
      const jobs = jobsTable({ form });
      await createTable(stand, context.db, jobs);
      const events = jobs.queue<unknown>('events');
      const pool = openServiceWriters(stand, context.db)[0]!;
      try {
        const steady = queueDestination(events);
        const failed = createDeferred();
        let hasFailed = false;
        const failingOnce: OutboxDestination = {
          ...steady,
          description: 'queue that fails once after writing',
          sendWithin: async (records: readonly OutboxRecord[], transaction: RelayTransaction) => {
            await steady.sendWithin!(records, transaction);
            if (!hasFailed) {
              hasFailed = true;
              failed.resolve();
              throw new DestinationError({ destination: 'test', message: 'fails after its rows were written' });
            }
          },
        };
        const handled = new Collector<{ payload: unknown; recordId: string | undefined }>();
        const brokers = [createBroker(context.db, context.brokers), createBroker(context.db, context.brokers)];
        brokers[0]!.on('error', () => undefined);
        const relays = [
          brokers[0]!.relay(outbox, failingOnce, { batch: 4, retryBackoff: { initialMs: 100, maxMs: 1_000 } }),
          brokers[1]!.relay(outbox, steady, { batch: 4 }),
        ];
        brokers[0]!.subscribe(events, (message) => {
          handled.push({ payload: message.payload, recordId: message.headers[OUTBOX_RECORD_ID_HEADER] });
        }, { workers: 2 });
        await brokers[0]!.start();
        const ids = await writeRecords(pool, brokers[0]!.outbox(outbox), recordsOver(['x', 'y'], 24));
        // The second relay joins once the first one's transaction failed, and both relay the rest.
        await failed.promise;
        await brokers[1]!.start();
        await handled.waitFor(24);
        await untilRelayed(relays, () => relays.reduce((sum, relay) => sum + relay.stats().relayed, 0) === 24, 'every record relayed');
        for (const broker of brokers) await broker.stop();
        expect(relays.every((relay) => relay.stats().isTransactional)).toBe(true);
        // Relayed rows go through the broker's publish path: counted as published (the failed
        // batch too, whose transaction rolled back after its rows were written).
        const published = brokers
          .flatMap((broker) => broker.metrics().split('\n'))
          .filter((line) => line.startsWith('tablequeue_messages_published_total{') && line.includes('queue="events"'))
          .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
        expect(published).toBeGreaterThanOrEqual(24);
        expect(handled.items).toHaveLength(24);
        expect(handled.items.map((item) => item.recordId).sort()).toEqual([...ids].sort());
        expect(hasFailed).toBe(true);
        expect(await countRows(context.db, 'jobs')).toBe(0);
        expect(await unprocessedRecords(context.db)).toBe(0);
      } finally {
        await pool.end();
      }
    });

    it('a record a JSON queue could never take: refused at the write by a broker that relays there, named by a relay that claims one', async () => {
      await createOutboxTables();
      const jobs = defineTable({ ...jobsDeclaration({ form: formsOf(stand).at(-1)! }), payload: { column: 'payload', json: true } });
      await createTable(stand, context.db, jobs);
      const events = jobs.queue<unknown>('events');
      const notJson = Buffer.from([0xff, 0x00, 0x41]);
      const pool = openServiceWriters(stand, context.db)[0]!;
      try {
        // Written by a broker that relays nothing, as another service's process would write it.
        const writing = createBroker(context.db, context.brokers);
        await writing.start();
        const records = [{ n: 1 }, notJson, { n: 3 }].map((payload) => ({ name: 'events', payload }));
        const ids = await writeRecords(pool, writing.outbox(outbox), records);

        const relaying = createBroker(context.db, context.brokers);
        const errors = new Collector<Error>();
        // What a scrape reads once the error's backoff is set (in the same turn, after the report).
        const waiting = `tablequeue_outbox_names_waiting_to_retry{outbox="outbox",destination="tablequeue queue \\"jobs/events\\""}`;
        const waitingAtErrors = new Collector<number | undefined>();
        relaying.on('error', (error) => {
          errors.push(error);
          queueMicrotask(() => waitingAtErrors.push(metricValue(relaying, waiting)));
        });
        relaying.relay(outbox, queueDestination(events), { batch: 10, retryBackoff: { initialMs: 50, maxMs: 200 } });
        const handled = new Collector<unknown>();
        relaying.subscribe(events, (message) => {
          handled.push(message.payload);
        });
        await relaying.start();
        const written = writeRecords(pool, relaying.outbox(outbox), [{ name: 'events', payload: notJson }]);
        await expect(written).rejects.toThrow(EncodeError);
        await expect(written).rejects.toThrow(/relays it to tablequeue queue "jobs\/events", which could never take this record of "events": .*not UTF-8 JSON; nothing was written/);

        // The record before it goes; the refused one and the one after it wait.
        const [refused] = await errors.waitFor(1);
        expect(refused).toBeInstanceOf(EncodeError);
        expect(refused!.message).toContain(`record ${ids[1]} of "events" can never be sent there`);
        expect(refused!.message).toContain('until it is deleted from the outbox table or its payload rewritten');
        expect(await handled.waitFor(1)).toEqual([{ n: 1 }]);
        expect(await unprocessedRecords(context.db)).toBe(2);

        expect(await waitingAtErrors.waitFor(1)).toContain(1);

        await context.db.query(`DELETE FROM outbox WHERE id = ${placeholder(stand, 1)}`, [ids[1]]);
        await handled.waitFor(2);
        expect(handled.items).toEqual([{ n: 1 }, { n: 3 }]);
      } finally {
        await pool.end();
      }
    });

    it('a relay killed with SIGKILL in the middle of a batch loses nothing', async () => {
      if (!stand.capabilities.supportsProcesses) return;
      await createOutboxTables();
      const pool = openServiceWriters(stand, context.db)[0]!;
      try {
        const writer = createBroker(context.db, context.brokers);
        await writer.start();
        const ids = await writeRecords(pool, writer.outbox(outbox), recordsOver(['orders'], 20));
        const doomed = spawnRelay({
          database: context.db.url,
          outbox: OUTBOX,
          recordSql: receivedInsertSql(stand),
          hangAfter: 3,
          leaseMs: 1_000,
          batch: 10,
        });
        await doomed.ready;
        await doomed.sentAtLeast(3);
        doomed.child.kill('SIGKILL');
        await doomed.exited;
        expect(await unprocessedRecords(context.db)).toBe(20);

        const survivor = createBroker(context.db, context.brokers);
        const destination = new RecordingDestination(context, 'survivor');
        const relay = survivor.relay(outbox, destination, { batch: 10 });
        await survivor.start();
        await destination.received.waitFor(20, 30_000);
        await untilRelayed([relay], () => relay.stats().relayed === 20, 'every record marked processed');
        await survivor.stop();
        expect(destination.received.items.map((record) => record.id)).toEqual(ids);
        const rows = await receivedRows(context.db);
        // The killed batch's first three records went out twice: consumers dedupe by record id.
        expect(rows).toHaveLength(23);
        expect(new Set(rows.map((row) => row.record_id)).size).toBe(20);
        expect(await unprocessedRecords(context.db)).toBe(0);
      } finally {
        await pool.end();
      }
    });

    for (const [form, transactional] of formsOf(stand).flatMap((form) => [false, true].map((mode) => [form, mode] as const))) {
      it(`a deduplicating ${form} subscription (${transactional ? 'transactional' : 'not transactional'}) skips records it handled`, async () => {
        const jobs = jobsTable({ form });
        await createTable(stand, context.db, jobs);
        const seen = defineDedupeTable({ table: 'tablequeue_seen' });
        for (const sql of seen.createTableSql(stand.ddlDialect)) await context.db.exec(sql);
        const events = jobs.queue<string>('events');
        const broker = createBroker(context.db, context.brokers);
        const calls = new Collector<string>();
        broker.subscribe(
          events,
          (message) => {
            calls.push(message.payload);
            // The first delivery of "retried" asks to go again: nothing is noted until an ack.
            if (message.payload === 'retried' && message.attempt === 1) return Outcome.retry();
            return Outcome.ack();
          },
          { dedupe: { table: 'tablequeue_seen' }, transactional, workers: transactional ? 2 : 1 },
        );
        await broker.start();
        const withId = (id: string) => ({ headers: { [OUTBOX_RECORD_ID_HEADER]: id } });
        await broker.publishMany(events, [
          { payload: 'first', ...withId('101') },
          { payload: 'first again', ...withId('101') },
          { payload: 'second', ...withId('102') },
          { payload: 'retried', ...withId('103') },
          { payload: 'no record id' },
        ]);
        // Every row ends in an ack: the duplicate's without a call of the handler, "retried"'s at its second attempt.
        await untilStats(broker, events, (stats) => stats.acked === 5, 'every row acked');
        await broker.stop();
        expect(calls.items.filter((payload) => payload === 'first' || payload === 'first again')).toHaveLength(1);
        expect(calls.items.filter((payload) => payload === 'retried')).toHaveLength(2);
        expect(calls.items).toContain('second');
        expect(calls.items).toContain('no record id');
        expect(calls.items).toHaveLength(5);
        expect(await countRows(context.db, 'tablequeue_seen')).toBe(3);
      });
    }
  });
}
