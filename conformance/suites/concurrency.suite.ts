import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { defineTable, DeclarationError, UnsupportedError, type Broker, type TableDeclaration } from '../../src/index.js';
import { advisoryDeclaration } from './advisory-tables.js';
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

/**
 * A drain of 1,200 rows through three slots took 33 to 50 s on a loaded two-core machine; the
 * waits inside stay under this, so a failure names what it waited for.
 */
const PROCESS_TEST_TIMEOUT_MS = 240_000;

const LIMITED_REPLICA = fileURLToPath(new URL('../processes/limited-replica.ts', import.meta.url));

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
  const recordSql = `INSERT INTO effects (id, customer, pid, phase) VALUES (${marks(4)})`;
  const createEffects = () => context.db.exec(effectsTable(context));

  /**
   * perKey: 1 on `declaration`'s table: a claim reads the keys of the first 1,000 claimable rows
   * in claim order; 1,100 rows of one key fill that window while the key's only slot is held by
   * its first row, parked at the gate, and a key published after them still runs.
   */
  const deepKeyRunsPastAFullWindow = async (declaration: TableDeclaration): Promise<void> => {
    const table = defineTable(declaration);
    await createTable(stand, context.db, table);
    const queue = table.queue<number>('emails');
    const gate = new Gate();
    const deepHandled = new Collector<string>();
    const broker = createBroker(context.db, context.brokers);
    broker.subscribe(queue, (message) => (message.partitionKey === 'deep' ? void deepHandled.push(message.id) : gate.handler(message)), {
      workers: 2,
      concurrency: { perKey: 1 },
    });
    await broker.start();
    await broker.publishMany(queue, Array.from({ length: 1_100 }, (_, index) => ({ payload: index, partitionKey: 'ahead' })));
    await gate.started.waitFor(1);
    await untilStats(broker, queue, (stats) => stats.emptyClaims >= 1, 'a claim that found the only key of its window at its limit');
    await broker.publish(queue, -1, { partitionKey: 'deep' });
    // A claim after one that came up short reads every claimable row now and then.
    await deepHandled.waitFor(1, 20_000);
    expect(gate.started.items).toHaveLength(1);
    gate.open();
  };

  if (formsOf(stand).includes('rowLock')) {
    /** Read committed: what perKey in the row lock form needs on MySQL and MariaDB (see the refusal below). */
    const keyedRowLock = (): TableDeclaration => ({ ...jobsDeclaration({ form: 'rowLock' }), partitionKey: 'customer', isolation: 'read committed' });

    it('perKey: 1 in the row lock form: two brokers hold one row of each key between them, rows without a key go alongside, and a key\'s next row goes once its first settles', async () => {
      const table = defineTable(keyedRowLock());
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const gate = new Gate();
      const keysStarted: (string | null)[] = [];
      const handler = (message: { id: string; partitionKey: string | null }) => {
        keysStarted.push(message.partitionKey);
        return gate.handler(message);
      };
      const brokers = [createBroker(context.db, context.brokers), createBroker(context.db, context.brokers)];
      // More workers than keys: each broker has one free to claim again and find every key at its limit.
      for (const broker of brokers) broker.subscribe(queue, handler, { workers: 4, concurrency: { perKey: 1 } });
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      const keys = ['a', 'a', 'a', 'b', 'b', undefined];
      await publisher.publishMany(queue, keys.map((partitionKey, index) => (partitionKey === undefined ? { payload: index } : { payload: index, partitionKey })));
      for (const broker of brokers) await broker.start();
      await gate.started.waitFor(3);
      // Each broker claims again after the rows were taken, and finds every key at its limit.
      for (const broker of brokers) {
        await untilStats(broker, queue, (stats) => stats.emptyClaims >= 2, 'claims that found each key at its limit');
      }
      expect(gate.started.items).toHaveLength(3);
      expect([...keysStarted].sort()).toEqual(['a', 'b', null]);
      expect(statsOf(brokers[0]!, queue).concurrency).toEqual({ global: undefined, perKey: 1 });
      gate.open();
      await gate.started.waitFor(6);
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
    });

    it('perKey: 1 in the row lock form: a key first published while every claim finds a free slot of other keys runs long before their rows run out', async () => {
      const table = defineTable(keyedRowLock());
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      const broker = createBroker(context.db, context.brokers);
      const handled = new Collector<string>();
      // Each row takes a moment, so the other keys' rows last seconds: a workload, not a wait for an event.
      broker.subscribe(queue, async (message) => {
        handled.push(message.payload);
        if (message.payload !== 'late') await delay(10);
      }, { workers: 2, concurrency: { perKey: 1 } });
      const rowsPerKey = 200;
      await broker.start();
      // Interleaved in claim order, so that no key runs out of rows before the others.
      const keys = ['a', 'b', 'c'];
      await broker.publishMany(queue, Array.from({ length: keys.length * rowsPerKey }, (_, index) => ({ payload: keys[index % 3]!, partitionKey: keys[index % 3]! })));
      await handled.waitFor(10);
      // First in claim order, so that nothing but a missing slot can hold it back.
      await broker.publish(queue, 'late', { partitionKey: 'late', priority: -1 });
      await waitForDatabase(async () => handled.items.includes('late'), 30_000, 'the late key handled');
      // Two workers and three other keys: every claim found a free slot, so none was short of
      // slots. Before, the late key got its slot only once those keys' rows ran out, at the end.
      expect(handled.items.indexOf('late')).toBeLessThan(3 * rowsPerKey - 50);
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 30_000, 'every row settled');
    });

    it('perKey: 1 in the row lock form: a key whose first row lies past the first thousand claimable rows runs while the one key ahead of it has its only slot in work', () =>
      deepKeyRunsPastAFullWindow(keyedRowLock()));

    it('perKey: 1 in the row lock form: a key whose slot a claim passed over on its way to another key\'s runs while that claim\'s row is in work', async () => {
      // The claim of m's row reads past a's slot (a has no row then). Taken by a locking read in
      // key order, InnoDB kept the lock on a's slot until m's handler ended, and a's row waited.
      const table = defineTable(keyedRowLock());
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      const gate = new Gate();
      const handled = new Collector<string>();
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(queue, async (message) => {
        handled.push(message.payload);
        if (message.payload === 'held') await gate.handler(message);
      }, { workers: 3, concurrency: { perKey: 1 } });
      await broker.start();
      // a and then x get their slots; x is the last key taken, so the next take wraps around past a.
      for (const key of ['a', 'x']) {
        await broker.publish(queue, key, { partitionKey: key });
        await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, `${key}'s row settled`);
      }
      await broker.publish(queue, 'held', { partitionKey: 'm' });
      await gate.started.waitFor(1);
      await broker.publish(queue, 'a again', { partitionKey: 'a' });
      await handled.waitFor(4, 20_000);
      expect(handled.items).toEqual(['a', 'x', 'held', 'a again']);
      gate.open();
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
    });

    it('perKey: 2 in the row lock form: a key with its only row in work holds back no other key, nor rows without a key', async () => {
      const table = defineTable(keyedRowLock());
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const gate = new Gate();
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(queue, gate.handler, { workers: 3, concurrency: { perKey: 2 } });
      await broker.start();
      await broker.publish(queue, 'a', { partitionKey: 'a' });
      await gate.started.waitFor(1);
      await broker.publish(queue, 'b', { partitionKey: 'b' });
      await gate.started.waitFor(2);
      await broker.publish(queue, 'none');
      await gate.started.waitFor(3);
      gate.open();
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
    });

    it('perKey: 2 in the row lock form: keys whose rows are all in work on another broker are passed over, and its next claims go past them', async () => {
      const table = defineTable(keyedRowLock());
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      const gate = new Gate();
      const holder = createBroker(context.db, context.brokers);
      holder.subscribe(queue, gate.handler, { workers: 4, concurrency: { perKey: 2 } });
      await holder.start();
      await holder.publishMany(queue, ['a', 'b', 'c', 'd'].map((key) => ({ payload: key, partitionKey: key })));
      await gate.started.waitFor(4);
      // The four rows head the claim order, in work elsewhere: each key has a free slot and no row
      // for it. The other broker's first claim meets three of them and takes nothing; it polls
      // only when the test is long over, so what runs next runs on the wake of its own publish.
      const handled = new Collector<string>();
      const other = createBroker(context.db, context.brokers, { pollIntervalMs: 600_000 });
      other.subscribe(queue, (message) => void handled.push(message.payload), { workers: 1, concurrency: { perKey: 2 } });
      await other.start();
      await untilStats(other, queue, (stats) => stats.emptyClaims >= 1, 'the first claim of the other broker');
      await other.publish(queue, 'e', { partitionKey: 'e' });
      expect(await handled.waitFor(1, 20_000)).toEqual(['e']);
      gate.open();
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
    });

    it('perKey: 2 in the row lock form: a key\'s slots are deleted once it has no row left, a key with a row in work keeps them, and a key seen again gets them back', async () => {
      const table = defineTable(keyedRowLock());
      await createTable(stand, context.db, table);
      const queue = table.queue<string>('emails');
      const keySlotsOf = (where: string) => countRows(context.db, 'tablequeue_concurrency_key_slots', `table_name = 'jobs' AND ${where}`);
      const gate = new Gate();
      const handled = new Collector<string>();
      const handler = async (message: { id: string; payload: string }) => {
        handled.push(message.payload);
        if (message.payload === 'held') await gate.handler(message);
      };
      const first = createBroker(context.db, context.brokers);
      first.subscribe(queue, handler, { workers: 4, concurrency: { perKey: 2 } });
      await first.start();
      // 1,040 slots: more than one page of a prune on MySQL and MariaDB.
      const keys = Array.from({ length: 520 }, (_, index) => `k${index}`);
      await first.publishMany(queue, [{ payload: 'held', partitionKey: 'held' }, ...keys.map((key) => ({ payload: key, partitionKey: key }))]);
      await handled.waitFor(keys.length + 1);
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 1, 20_000, 'every row but the held one settled');
      expect(await keySlotsOf(`key_value LIKE 'k%'`)).toBe(keys.length * 2);
      // A subscription's first claim deletes the slots of keys without rows; the held key's row is
      // in work, so its slots stay, the one its delivery holds and the free one.
      const second = createBroker(context.db, context.brokers);
      second.subscribe(queue, handler, { workers: 1, concurrency: { perKey: 2 } });
      await second.start();
      await untilStats(second, queue, (stats) => stats.emptyClaims >= 1, 'a claim of the second subscription');
      expect(await keySlotsOf(`key_value LIKE 'k%'`)).toBe(0);
      expect(await keySlotsOf(`key_value = 'held'`)).toBe(2);
      // A key seen again gets its slots back from the next add.
      await second.publishMany(queue, ['k1', 'k1', 'k1'].map((key) => ({ payload: 'again', partitionKey: key })));
      await waitForDatabase(async () => handled.items.filter((payload) => payload === 'again').length === 3, 20_000, 'the key seen again handled');
      expect(await keySlotsOf(`key_value = 'k1'`)).toBe(2);
      gate.open();
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
      // Stopped, so that no poll of theirs holds a slot row (a locking read on MariaDB locks the
      // rows it visits) while the third's first claim deletes slots without waiting for locked ones.
      await first.stop();
      await second.stop();
      const third = createBroker(context.db, context.brokers);
      third.subscribe(queue, handler, { workers: 1, concurrency: { perKey: 2 } });
      await third.start();
      await untilStats(third, queue, (stats) => stats.emptyClaims >= 1, 'a claim of the third subscription');
      expect(await keySlotsOf('1 = 1')).toBe(0);
    });

    it('perKey: 1 in the row lock form: a row without a key in work holds back no keyed row the claim passed over', async () => {
      // InnoDB keeps the lock on each row a locking read visits in the claim index: a claim for
      // the row without a key once visited a2 on its way and held it until its own handler ended.
      const table = defineTable(keyedRowLock());
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const started = new Collector<string>();
      const releases = new Map<string, Deferred<void>>();
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(
        queue,
        async (message) => {
          const release = createDeferred();
          releases.set(String(message.payload), release);
          started.push(String(message.payload));
          await release.promise;
        },
        { workers: 3, concurrency: { perKey: 1 } },
      );
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      await publisher.publishMany(queue, [{ payload: 'a1', partitionKey: 'a' }, { payload: 'a2', partitionKey: 'a' }, { payload: 'none' }]);
      await broker.start();
      await started.waitFor(2);
      expect([...started.items].sort()).toEqual(['a1', 'none']);
      releases.get('a1')!.resolve();
      await started.waitFor(3);
      expect(started.items[2]).toBe('a2');
      for (const release of releases.values()) release.resolve();
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
    });

    it('a batch handler under perKey: 2 in the row lock form gets at most two rows of a key per batch, rows without a key alongside', async () => {
      const table = defineTable(keyedRowLock());
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      const keys = ['a', 'a', 'a', 'b', 'b', 'b', undefined, undefined];
      await publisher.publishMany(queue, keys.map((partitionKey, index) => (partitionKey === undefined ? { payload: index } : { payload: index, partitionKey })));
      const broker = createBroker(context.db, context.brokers);
      const batches = new Collector<(string | null)[]>();
      broker.subscribe(queue, (messages) => void batches.push(messages.map((message) => message.partitionKey)), { batch: 10, concurrency: { perKey: 2 } });
      await broker.start();
      await batches.waitFor(2);
      // The first batch's transaction held two slots of each key; the second came after it committed.
      expect(batches.items.map((batch) => [...batch].sort())).toEqual([['a', 'a', 'b', 'b', null, null], ['a', 'b']]);
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
    });

    if (stand.kind === 'mysql') {
      it('refuses perKey in the row lock form at repeatable read, naming read committed', async () => {
        const table = defineTable({ ...jobsDeclaration({ form: 'rowLock' }), partitionKey: 'customer' });
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(table.queue('emails'), () => undefined, { concurrency: { perKey: 1 } });
        const error: unknown = await broker.start().catch((failure: unknown) => failure);
        expect(error).toBeInstanceOf(UnsupportedError);
        expect((error as Error).message).toMatch(/locks the gaps beside the slots a delivery holds.*Declare isolation: 'read committed'/);
      });
    }
  }

  it('perKey: 1 in the lease form: a key whose first row lies past the first thousand claimable rows runs while the one key ahead of it has its only row in work', () =>
    deepKeyRunsPastAFullWindow({ ...jobsDeclaration({ form: 'lease' }), partitionKey: 'customer' }));

  /** The warnings of a broker started with `subscribe`'s subscriptions, then stopped. */
  const startWarnings = async (subscribe: (broker: Broker) => void): Promise<string[]> => {
    const broker = createBroker(context.db, context.brokers);
    const warnings: string[] = [];
    broker.on('warning', (message) => warnings.push(message));
    subscribe(broker);
    await broker.start();
    await broker.stop();
    return warnings;
  };

  it('start() warns once when limited lease subscriptions count rows in work on a table without the in-work index, with the CREATE INDEX that adds it; then nothing', async () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    await createTable(stand, context.db, table);
    // Unlimited, the claims count nothing: no catalog read to warn from.
    expect(await startWarnings((broker) => broker.subscribe(table.queue('emails'), () => undefined))).toEqual([]);
    // Two limited queues of one table: one warning that names both.
    const limited = (broker: Broker) => {
      broker.subscribe(table.queue('emails'), () => undefined, { concurrency: { global: 2 } });
      broker.subscribe(table.queue('texts'), () => undefined, { concurrency: { global: 1 } });
    };
    const warnings = await startWarnings(limited);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('table "jobs": subscriptions "jobs/emails", "jobs/texts" count the rows in work on every claim (a concurrency limit)');
    expect(warnings[0]).toContain('no index of the table leads with ("queue", "locked_until"), so each count reads the whole table');
    const fix = /add the index with: (CREATE INDEX .*)$/.exec(warnings[0]!)?.[1];
    expect(fix).toBe(table.createTableSql(stand.ddlDialect, { inWorkIndex: true }).at(-1));

    // The statement the warning gives is the fix: the next start has nothing to say.
    await context.db.exec(fix!);
    expect(await startWarnings(limited)).toEqual([]);
  });

  it('start() finds the in-work index on a FIFO lease table createTableSql made, and warns on one made without it', async () => {
    const declaration: TableDeclaration = { ...jobsDeclaration({ form: 'lease' }), group: { column: 'queue', fifo: true } };
    const table = defineTable(declaration);
    const statements = table.createTableSql(stand.ddlDialect);
    const indexStatement = statements.find((statement) => statement.includes('_in_work'));
    expect(indexStatement).toBeDefined();
    for (const statement of statements) if (statement !== indexStatement) await context.db.exec(statement);
    const subscribe = () => startWarnings((broker) => broker.subscribe(table.queue('emails'), () => undefined));
    const [warning, ...others] = await subscribe();
    expect(others).toEqual([]);
    expect(warning).toContain(`subscription "jobs/emails" counts the rows in work on every claim (FIFO groups: a group's head waits while one of its rows is in work)`);
    await context.db.exec(indexStatement!);
    expect(await subscribe()).toEqual([]);
  });

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

  /** Every form a global limit holds in: the row forms here, and the advisory form (SQLite: within the process). */
  const globalForms: [string, TableDeclaration][] = [
    ...formsOf(stand).map((form): [string, TableDeclaration] => [form, jobsDeclaration({ form })]),
    ['advisory', advisoryDeclaration()],
  ];
  /** The forms a global limit holds in across processes: the advisory form only where keys are the server's. */
  const processForms = globalForms.filter(([form]) => form !== 'advisory' || stand.capabilities.supportsSessionLocks);

  for (const [form, declaration] of globalForms) {
    it(`two brokers with global: 2 hold two rows between them; the others wait until one settles (${form})`, async () => {
      const table = defineTable(declaration);
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
      for (const broker of brokers) {
        await untilStats(broker, queue, (stats) => stats.emptyClaims >= 2, 'claims that found the limit reached');
      }
      expect(gate.started.items).toHaveLength(2);
      if (form === 'lease') expect(await countRows(context.db, 'jobs', 'locked_until IS NOT NULL')).toBe(2);
      expect(statsOf(brokers[0]!, queue).concurrency).toEqual({ global: 2, perKey: undefined });
      const metrics = brokers[0]!.metrics();
      expect(metrics).toContain('tablequeue_concurrency_limit{table="jobs",queue="emails",scope="global"} 2\n');
      expect(metrics).not.toContain('scope="perKey"');
      gate.open();
      await gate.started.waitFor(6);
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
    });
  }

  if (!stand.capabilities.supportsProcesses) return;

  for (const [form, declaration] of processForms) {
    it(`four replica processes with global: 3 never have more than 3 rows in work, and handle every row (${form})`, async () => {
      const table = defineTable(declaration);
      await createTable(stand, context.db, table);
      await createEffects();
      // The advisory form takes each row under a key lock of its own, a round trip apiece: 400 rows
      // show the bound in a third of the time.
      const rowCount = form === 'advisory' ? 400 : 1_200;
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      const config = {
        database: context.db.url,
        table: declaration,
        queue: 'emails',
        workers: 4,
        concurrency: { global: 3 },
        recordSql,
        handlerMs: 2,
      };
      const replicas = Array.from({ length: 4 }, () => spawnReplica(config));
      const driver = await context.db.openDriver({ poolSize: 1 });
      try {
        // Published once every replica is polling: rows there before would go to whichever replica
        // started first (the others take seconds to start under load, longer than the drain).
        await Promise.all(replicas.map((replica) => replica.ready));
        await publisher.publishMany(table.queue('emails'), Array.from({ length: rowCount }, (_, index) => ({ payload: index })));
        const drained = async () => (await countRows(context.db, 'jobs')) === 0;
        if (form === 'lease') {
          const { samples, most } = await sampleUntil(driver, `SELECT COUNT(*) AS n FROM jobs WHERE locked_until > ${marks(1)}`, drained, 200_000);
          expect(most).toBeLessThanOrEqual(3);
          expect(most).toBeGreaterThan(0);
          expect(samples).toBeGreaterThan(100);
        } else {
          await waitForDatabase(drained, 200_000, 'every row settled');
        }
        // What the handlers saw, for both forms: a lower bound of the rows in work at each moment.
        expect(await mostHandlersAtOnce(context)).toBeLessThanOrEqual(3);
        expect(await countRows(context.db, '(SELECT DISTINCT id FROM effects) AS handled')).toBe(rowCount);
        // Over the network a replica's claim after its own settlement takes a round trip, in
        // which the others' polls find the freed slot, so every replica takes a share. On a SQLite
        // file that claim follows in microseconds, before any other replica's next poll, so one
        // process may hold all three slots to the end (a freed slot goes at once to the replica
        // whose worker freed it, to the others within a poll): the others waiting while rows
        // waited is the limit holding across processes, as a per-process limit would have let
        // each of the four take rows.
        const pids = await context.db.query<{ pid: unknown }>('SELECT DISTINCT pid FROM effects');
        if (stand.kind !== 'sqlite') expect(pids.length).toBeGreaterThan(1);
      } finally {
        await driver.close();
        await stopReplicas(replicas);
      }
    }, PROCESS_TEST_TIMEOUT_MS);
  }

  for (const [form, declaration] of processForms.filter(([name]) => name !== 'lease')) {
    it(`global: 2 (${form}): a SIGKILLed replica frees its slots at once, not after a lease`, async () => {
      const table = defineTable(declaration);
      await createTable(stand, context.db, table);
      await createEffects();
      const rowCount = 300;
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      await publisher.publishMany(table.queue('emails'), Array.from({ length: rowCount }, (_, index) => ({ payload: index })));
      const config = {
        database: context.db.url,
        table: declaration,
        queue: 'emails',
        workers: 3,
        concurrency: { global: 2 },
        recordSql,
        handlerMs: 5,
      };
      const replicas = Array.from({ length: 3 }, () => spawnReplica(config));
      try {
        await Promise.all(replicas.map((replica) => replica.ready));
        const victim = await Promise.any(replicas.map(async (replica) => (await replica.itemsAtLeast(10), replica)));
        victim.child.kill('SIGKILL');
        await victim.exited;
        await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 60_000, 'every row settled');
        expect(await mostHandlersAtOnce(context)).toBeLessThanOrEqual(2);
        expect(await countRows(context.db, '(SELECT DISTINCT id FROM effects) AS handled')).toBe(rowCount);
      } finally {
        await stopReplicas(replicas);
      }
    }, PROCESS_TEST_TIMEOUT_MS);
  }

  /** The forms perKey holds in across processes, with their tables. */
  const perKeyForms: [string, TableDeclaration][] = [
    ['lease', { ...jobsDeclaration({ form: 'lease' }), partitionKey: 'customer' }],
    ...(formsOf(stand).includes('rowLock')
      ? [['rowLock', { ...jobsDeclaration({ form: 'rowLock' }), partitionKey: 'customer', isolation: 'read committed' }] as [string, TableDeclaration]]
      : []),
  ];
  for (const [form, declaration] of perKeyForms) {
    const freed = form === 'lease' ? "while a SIGKILLed replica's rows wait out their lease" : "also after a replica is SIGKILLed (its slots' locks end with its connections)";
    it(`perKey: 1 holds across three replica processes, ${freed} (${form})`, async () => {
      const table = defineTable(declaration);
      await createTable(stand, context.db, table);
      await createEffects();
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
        table: declaration,
        queue: 'emails',
        workers: 4,
        concurrency: { perKey: 1 },
        recordSql,
        handlerMs: 5,
        leaseMs: 1_000,
      };
      const replicas = Array.from({ length: 3 }, () => spawnReplica(config));
      const driver = await context.db.openDriver({ poolSize: 1 });
      try {
        await Promise.all(replicas.map((replica) => replica.ready));
        // The first replica to have handled 20 rows dies while it holds its next ones.
        const victim = await Promise.any(replicas.map(async (replica) => (await replica.itemsAtLeast(20), replica)));
        victim.child.kill('SIGKILL');
        await victim.exited;
        const drained = async () => (await countRows(context.db, 'jobs')) === 0;
        if (form === 'lease') {
          const { samples, most } = await sampleUntil(
            driver,
            `SELECT customer, COUNT(*) AS n FROM jobs WHERE locked_until > ${marks(1)} GROUP BY customer`,
            drained,
            120_000,
          );
          expect(most).toBe(1);
          expect(samples).toBeGreaterThan(100);
        } else {
          // A row lock leaves nothing in the table to sample: the handlers' records show the bound.
          await waitForDatabase(drained, 120_000, 'every row settled');
          expect(await mostHandlersAtOnce(context, 'perKey')).toBe(1);
        }
        expect(await countRows(context.db, '(SELECT DISTINCT id FROM effects) AS handled')).toBe(rowCount);
      } finally {
        await driver.close();
        await stopReplicas(replicas);
      }
    }, PROCESS_TEST_TIMEOUT_MS);
  }
}

/** Effects in the order they were written: each handler's start and end, by id, key and process. */
function effectsTable(context: SuiteContext): string {
  const seq =
    context.stand.kind === 'postgres'
      ? 'seq BIGSERIAL PRIMARY KEY'
      : context.stand.kind === 'mysql'
        ? 'seq BIGINT AUTO_INCREMENT PRIMARY KEY'
        : 'seq INTEGER PRIMARY KEY AUTOINCREMENT';
  return `CREATE TABLE effects (${seq}, id VARCHAR(64) NOT NULL, customer VARCHAR(64), pid INTEGER NOT NULL, phase VARCHAR(8) NOT NULL)`;
}

/**
 * The most handlers between their start and end records at once, replaying the records in the
 * order they were written. A handler's row is in work from before its start record until after
 * its end record, so this never counts more than were in work. A handler without an end record
 * (its process was killed) counts until the end of its process's records. `perKey`: the most of
 * one partition key.
 */
async function mostHandlersAtOnce(context: SuiteContext, scope: 'global' | 'perKey' = 'global'): Promise<number> {
  const rows = await context.db.query<{ id: string; customer: string | null; pid: unknown; phase: string }>(
    'SELECT id, customer, pid, phase FROM effects ORDER BY seq',
  );
  const ended = new Set(rows.filter((row) => row.phase === 'end').map((row) => `${String(row.pid)}/${row.id}`));
  const lastOfProcess = new Map(rows.map((row, index) => [String(row.pid), index]));
  const groupOf = (row: { customer: string | null }) => (scope === 'global' ? '' : String(row.customer));
  const running = new Map<string, number>();
  const add = (group: string, count: number) => running.set(group, (running.get(group) ?? 0) + count);
  let most = 0;
  const endsAt = new Map<number, string[]>();
  rows.forEach((row, index) => {
    for (const group of endsAt.get(index) ?? []) add(group, -1);
    const key = `${String(row.pid)}/${row.id}`;
    if (row.phase === 'start') {
      add(groupOf(row), 1);
      if (!ended.has(key)) {
        const last = lastOfProcess.get(String(row.pid))!;
        endsAt.set(last + 1, [...(endsAt.get(last + 1) ?? []), groupOf(row)]);
      }
    } else add(groupOf(row), -1);
    most = Math.max(most, running.get(groupOf(row)) ?? 0);
  });
  return most;
}

function spawnReplica(config: Record<string, unknown>): LineProcess<string> {
  return spawnLineProcess({ script: LIMITED_REPLICA, config, label: 'limited replica', prefix: 'handling ', parse: (id) => id });
}

async function stopReplicas(replicas: readonly LineProcess<string>[]): Promise<void> {
  for (const replica of replicas) if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGTERM');
  await Promise.all(replicas.map((replica) => replica.exited));
}
