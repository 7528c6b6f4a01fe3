import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createRateLimitsByKeyTableSql, createRateLimitsTableSql, defineTable, DeclarationError, UnsupportedError, type Broker, type QueueTable } from '../../src/index.js';
import { advisoryTable } from './advisory-tables.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsDeclaration, statsOf, untilStats, waitForDatabase } from '../fixtures.js';
import { spawnLineProcess, type LineProcess } from '../processes/spawn-line-process.js';
import type { SuiteContext } from '../run-conformance.js';

const RATE_LIMITED_REPLICA = fileURLToPath(new URL('../processes/rate-limited-replica.ts', import.meta.url));

export function rateSuite(context: SuiteContext): void {
  describe('rate limits', () => registerRateTests(context));
}

/**
 * The most of `times` (milliseconds, any order) within any window of `windowMs`: for each time,
 * the times from it up to, not including, it plus the window.
 */
export function mostWithinWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let end = 0;
  for (let start = 0; start < sorted.length; start += 1) {
    while (end < sorted.length && sorted[end]! < sorted[start]! + windowMs) end += 1;
    most = Math.max(most, end - start);
  }
  return most;
}

function registerRateTests(context: SuiteContext): void {
  const { stand } = context;
  const marks = (count: number) => Array.from({ length: count }, (_, index) => (stand.kind === 'postgres' ? `$${index + 1}` : '?')).join(', ');
  const recordSql = `INSERT INTO handled (id, pid, handled_at_ms) VALUES (${marks(3)})`;
  const createHandled = () => context.db.exec('CREATE TABLE handled (id VARCHAR(64) NOT NULL, pid INTEGER NOT NULL, handled_at_ms BIGINT NOT NULL)');
  const handledTimes = async () =>
    (await context.db.query<{ handled_at_ms: unknown }>('SELECT handled_at_ms FROM handled')).map((row) => Number(row.handled_at_ms));
  /** Each slot's last use: when the claim that used it ran, as the claim stamped it. */
  const slotUses = async () =>
    (await context.db.query<{ slot: unknown; used_at_ms: unknown }>('SELECT slot, used_at_ms FROM tablequeue_rate_limits')).map(
      (row) => `${String(row.slot)}@${String(row.used_at_ms)}`,
    );
  const usedAt = (use: string) => Number(use.split('@')[1]);

  /** The slots stamped within the last hour: reservations the claims used, not those given back. */
  const slotsInUse = async () =>
    (await slotUses()).filter((use) => usedAt(use) > Date.now() - 3_600_000).length;

  const reservingTables: [string, () => QueueTable][] = [
    ...(formsOf(stand).includes('rowLock') ? [['rowLock', () => defineTable(jobsDeclaration({ form: 'rowLock' }))] as [string, () => QueueTable]] : []),
    ['advisory', () => advisoryTable()],
  ];
  for (const [form, tableOf] of reservingTables) {
    it(`${form}: reserves slots around each claim, gives back what the claim did not take, and holds the rate`, async () => {
      const table = tableOf();
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const handled = new Collector<unknown>();
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(queue, (message) => void handled.push(message.payload), { workers: 4, rate: { limit: 3, perMs: 60_000 } });
      await broker.start();
      await broker.publishMany(queue, [{ payload: 1 }, { payload: 2 }]);
      await handled.waitFor(2);
      // Workers that found the queue empty reserved a slot each and gave it back.
      await untilStats(broker, queue, (stats) => stats.emptyClaims >= 2, 'claims that found the queue empty');
      await waitForDatabase(async () => (await slotsInUse()) === 2, 5_000, 'two slots in use: the idle claims gave theirs back');
      await broker.publishMany(queue, [{ payload: 3 }, { payload: 4 }]);
      await handled.waitFor(3);
      await untilStats(broker, queue, (stats) => stats.rateHeldBack >= 1, 'a claim the rate held back');
      expect(handled.items).toHaveLength(3);
      expect(await slotsInUse()).toBe(3);
      // The handler's return commits the claim's transaction with the ack just after.
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 1, 5_000, 'three rows acked, one left');
    });
  }

  it('refuses a rate per key where it cannot hold, and limits, windows and keys that are not what they must be', async () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    const broker = createBroker(context.db, context.brokers);
    const subscribe = (rate: unknown) => () =>
      broker.subscribe(table.queue('emails'), () => undefined, { rate: rate as { limit: number; perMs: number } });
    expect(subscribe({ limit: 5, perMs: 1_000, key: 'customer' })).toThrow(DeclarationError);
    expect(subscribe({ limit: 5, perMs: 1_000, key: 'customer' })).toThrow(/rate.key must be true \(a limit per partition key\) or false/);
    expect(subscribe({ limit: 0, perMs: 1_000 })).toThrow(/rate.limit must be a whole number of claims from 1 to 1000/);
    expect(subscribe({ limit: 5, perMs: 0.5 })).toThrow(/rate.perMs must be a whole number of milliseconds/);
    expect(subscribe({ limit: 5, perMs: 1_000, every: 2 })).toThrow(/unknown rate option "every"; the options are limit, perMs and key/);
    await createTable(stand, context.db, table);
    const unkeyed = createBroker(context.db, context.brokers);
    unkeyed.subscribe(table.queue('emails'), () => undefined, { rate: { limit: 5, perMs: 1_000, key: true } });
    const unkeyedError: unknown = await unkeyed.start().catch((failure: unknown) => failure);
    expect(unkeyedError).toBeInstanceOf(DeclarationError);
    expect((unkeyedError as Error).message).toMatch(/declares no partitionKey column: declare one in defineTable or remove rate.key/);
    const others = [
      ...(formsOf(stand).includes('rowLock') ? [defineTable({ ...jobsDeclaration({ form: 'rowLock', name: 'jobs_row_lock' }), partitionKey: 'customer' })] : []),
      advisoryTable({ name: 'jobs_advisory', keyedByCustomer: true }),
    ];
    for (const other of others) {
      await createTable(stand, context.db, other);
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(other.queue('emails'), () => undefined, { rate: { limit: 5, perMs: 1_000, key: true } });
      const error: unknown = await broker.start().catch((failure: unknown) => failure);
      expect(error).toBeInstanceOf(UnsupportedError);
      expect((error as Error).message).toMatch(/declare a lockedUntil column \(lease form\), or remove rate.key to limit the whole queue/);
    }
  });

  it('per key: takes at most limit rows of each key per window, rows without a key unlimited, and keys do not hold each other back', async () => {
    const table = defineTable({ ...jobsDeclaration({ form: 'lease' }), partitionKey: 'customer' });
    await createTable(stand, context.db, table);
    const queue = table.queue('emails');
    const handled = new Collector<string>();
    const broker = createBroker(context.db, context.brokers);
    broker.subscribe(queue, (message) => void handled.push(String(message.payload)), {
      workers: 4,
      rate: { limit: 2, perMs: 60_000, key: true },
    });
    await broker.start();
    await broker.publishMany(queue, [
      ...['a1', 'a2', 'a3'].map((payload) => ({ payload, partitionKey: 'a' })),
      ...['b1', 'b2', 'b3'].map((payload) => ({ payload, partitionKey: 'b' })),
      { payload: 'none1' },
      { payload: 'none2' },
      { payload: 'none3' },
    ]);
    await handled.waitFor(7);
    // Every worker idle, claims coming back empty: a3 and b3 wait for their keys' next window.
    await untilStats(broker, queue, (stats) => stats.emptyClaims >= 2 && stats.inWork === 0, 'the loop idle with a3 and b3 held back');
    expect([...handled.items].sort()).toEqual(['a1', 'a2', 'b1', 'b2', 'none1', 'none2', 'none3']);
    await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 2, 5_000, 'seven rows settled, a3 and b3 left');
    await broker.publish(queue, 'c1', { partitionKey: 'c' });
    await handled.waitFor(8);
    expect(handled.items[7]).toBe('c1');
    const uses = await context.db.query<{ rate_key: unknown; uses: unknown }>('SELECT rate_key, uses FROM tablequeue_rate_limits_by_key');
    const usesByKey = new Map<string, number>();
    for (const row of uses) {
      const key = Buffer.isBuffer(row.rate_key) ? row.rate_key.toString('utf8') : String(row.rate_key);
      usesByKey.set(key, (usesByKey.get(key) ?? 0) + Number(row.uses));
    }
    expect(Object.fromEntries(usesByKey)).toEqual({ a: 2, b: 2, c: 1 });
  });

  it('takes at most limit rows per window, and a claim held back waits for the next slot instead of polling', async () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    await createTable(stand, context.db, table);
    const queue = table.queue('emails');
    const handledAt = new Collector<number>();
    const broker = createBroker(context.db, context.brokers);
    broker.subscribe(queue, () => void handledAt.push(Date.now()), { workers: 4, rate: { limit: 3, perMs: 1_500 } });
    await broker.start();
    await broker.publishMany(queue, Array.from({ length: 7 }, (_, index) => ({ payload: index })));
    await handledAt.waitFor(3);
    await untilStats(broker, queue, (stats) => stats.rateHeldBack >= 1, 'a claim the rate held back');
    const claimsWhileHeldBack = statsOf(broker, queue).claims;
    const firstUses = (await slotUses()).map(usedAt);
    // Publishing wakes an idle loop; a loop held back by the rate sleeps through it.
    await broker.publish(queue, { payload: 'wake' });
    await handledAt.waitFor(6);
    // Claim times, not handler starts: a handler may start later than its claim on a busy machine.
    const secondUses = (await slotUses()).map(usedAt);
    expect(Math.min(...secondUses) - Math.max(...firstUses)).toBeGreaterThanOrEqual(1_500);
    expect(handledAt.items[3]! - handledAt.items[0]!).toBeGreaterThan(1_000);
    // The held-back claim, then the one its wait ended with: the loop did not poll while waiting.
    expect(statsOf(broker, queue).claims - claimsWhileHeldBack).toBeLessThanOrEqual(2);
    expect(statsOf(broker, queue).rate).toEqual({ limit: 3, perMs: 1_500, key: false });
    const metrics = broker.metrics();
    expect(metrics).toContain('tablequeue_rate_limit{table="jobs",queue="emails"} 3\n');
    expect(metrics).toContain('tablequeue_rate_window_seconds{table="jobs",queue="emails"} 1.5\n');
    expect(metrics).toMatch(/tablequeue_rate_held_back_total\{table="jobs",queue="emails"\} [1-9]\d*\n/);
    await handledAt.waitFor(8);
    await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
  });

  /**
   * 550 rows at 50 per second take ten full windows after the first, so a run of about 10 s
   * shows both bounds: the rate is reached, not merely not exceeded (the last row handled within
   * 13 s of the first; the windows are not filled at once while the replica processes start), and
   * no second holds more than 50 claims. The claims are read from the
   * slots while the run goes: a slot keeps each use for a whole window before the next may
   * replace it, so reading every 100 ms sees every use, and there must be one per row. (Handler
   * starts are not the measure: on a loaded machine a handler starts up to tens of ms after its
   * claim, so starts from two windows can fall within one.)
   */
  it('three replicas with rate 50 per second stay within 50 in any second between them, and reach the rate', async () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    await createTable(stand, context.db, table);
    await createHandled();
    const rowCount = 550;
    const rate = { limit: 50, perMs: 1_000 };
    const publisher = createBroker(context.db, context.brokers);
    await publisher.start();
    await publisher.publishMany(table.queue('emails'), Array.from({ length: rowCount }, (_, index) => ({ payload: index })));
    const replicas: LineProcess<string>[] = [];
    const brokers: Broker[] = [];
    // Read from before the first replica starts: it claims while the others are still starting.
    // The table is created here for the reads; the replicas' own CREATE … IF NOT EXISTS does nothing.
    await context.db.exec(createRateLimitsTableSql(stand.ddlDialect));
    const uses = new Set<string>();
    const readUses = async () => {
      for (const use of await slotUses()) if (usedAt(use) > 0) uses.add(use);
    };
    // Every use, read while the run goes: a slot keeps one a whole window before it is reused.
    const drained = waitForDatabase(
      async () => {
        await readUses();
        return (await countRows(context.db, 'jobs')) === 0;
      },
      40_000,
      'every row settled',
    );
    try {
      if (stand.capabilities.supportsProcesses) {
        const config = { database: context.db.url, table: jobsDeclaration({ form: 'lease' }), queue: 'emails', workers: 8, rate, recordSql };
        for (let index = 0; index < 3; index += 1) replicas.push(spawnReplica(config));
        await Promise.all(replicas.map((replica) => replica.ready));
      } else {
        for (let index = 0; index < 3; index += 1) {
          const broker = createBroker(context.db, context.brokers);
          broker.subscribe(table.queue('emails'), (message, handlerContext) => handlerContext.query(recordSql, [message.id, index, Date.now()]).then(() => undefined), {
            workers: 8,
            rate,
          });
          brokers.push(broker);
        }
        for (const broker of brokers) await broker.start();
      }
      await drained;
      // A claim may have committed between the last check's read and its count.
      await readUses();
      expect(uses.size).toBe(rowCount);
      expect(mostWithinWindow([...uses].map(usedAt), rate.perMs)).toBeLessThanOrEqual(rate.limit);
      const times = await handledTimes();
      expect(times).toHaveLength(rowCount);
      const spanMs = Math.max(...times) - Math.min(...times);
      expect(spanMs).toBeGreaterThanOrEqual(10 * rate.perMs - 40);
      expect(spanMs).toBeLessThan(13 * rate.perMs);
      const pids = await context.db.query<{ pid: unknown }>('SELECT DISTINCT pid FROM handled');
      expect(pids.length).toBeGreaterThan(1);
    } finally {
      await drained.catch(() => undefined);
      for (const replica of replicas) if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGTERM');
      await Promise.all(replicas.map((replica) => replica.exited));
    }
  });

  if (stand.capabilities.supportsProcesses) {
    /**
     * Three keys of 30 rows at 10 per second per key: at least two windows after the first. The
     * uses are read from the uses table while the run goes (each lives a whole window before it
     * is forgotten), one entry per key and millisecond with the rows taken then.
     */
    it('per key: three replicas at 10 per second per key stay within 10 of each key in any second, and run the keys side by side', async () => {
      const declaration = { ...jobsDeclaration({ form: 'lease' }), partitionKey: 'customer' };
      const table = defineTable(declaration);
      await createTable(stand, context.db, table);
      await createHandled();
      const keys = ['a', 'b', 'c'];
      const rate = { limit: 10, perMs: 1_000, key: true };
      const publisher = createBroker(context.db, context.brokers);
      await publisher.start();
      await publisher.publishMany(
        table.queue('emails'),
        Array.from({ length: 90 }, (_, index) => ({ payload: index, partitionKey: keys[index % keys.length]! })),
      );
      await context.db.exec(createRateLimitsTableSql(stand.ddlDialect));
      await context.db.exec(createRateLimitsByKeyTableSql(stand.ddlDialect));
      const uses = new Map<string, number>();
      const readUses = async () => {
        const rows = await context.db.query<{ rate_key: unknown; used_at_ms: unknown; uses: unknown }>(
          'SELECT rate_key, used_at_ms, uses FROM tablequeue_rate_limits_by_key',
        );
        for (const row of rows) {
          const key = Buffer.isBuffer(row.rate_key) ? row.rate_key.toString('utf8') : String(row.rate_key);
          uses.set(`${key}@${String(row.used_at_ms)}`, Number(row.uses));
        }
      };
      // Every use, read while the run goes: each lives a whole window before it is forgotten.
      const drained = waitForDatabase(
        async () => {
          await readUses();
          return (await countRows(context.db, 'jobs')) === 0;
        },
        30_000,
        'every row settled',
      );
      const config = { database: context.db.url, table: declaration, queue: 'emails', workers: 8, rate, recordSql };
      const replicas = Array.from({ length: 3 }, () => spawnReplica(config));
      try {
        await Promise.all(replicas.map((replica) => replica.ready));
        await drained;
      } finally {
        await drained.catch(() => undefined);
        for (const replica of replicas) if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGTERM');
        await Promise.all(replicas.map((replica) => replica.exited));
      }
      // A claim may have committed between the last check's read and its count.
      await readUses();
      const timesOf = (key: string) =>
        [...uses].filter(([use]) => use.startsWith(`${key}@`)).flatMap(([use, count]) => Array.from({ length: count }, () => Number(use.split('@')[1])));
      for (const key of keys) {
        expect(timesOf(key)).toHaveLength(30);
        expect(mostWithinWindow(timesOf(key), rate.perMs)).toBeLessThanOrEqual(rate.limit);
      }
      // The keys run side by side: some second held more claims than one key's limit.
      expect(mostWithinWindow(keys.flatMap(timesOf), rate.perMs)).toBeGreaterThan(rate.limit);
      expect(await handledTimes()).toHaveLength(90);
    });
  }
}

function spawnReplica(config: Record<string, unknown>): LineProcess<string> {
  return spawnLineProcess({ script: RATE_LIMITED_REPLICA, config, label: 'rate limited replica', prefix: 'handling ', parse: (id) => id });
}
