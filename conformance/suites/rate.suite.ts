import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createRateLimitsTableSql, defineTable, DeclarationError, UnsupportedError, type Broker } from '../../src/index.js';
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

  if (formsOf(stand).includes('rowLock')) {
    it('refuses a rate on a row lock table at start, naming the lease form', async () => {
      const table = defineTable(jobsDeclaration({ form: 'rowLock' }));
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => undefined, { rate: { limit: 5, perMs: 1_000 } });
      const error: unknown = await broker.start().catch((failure: unknown) => failure);
      expect(error).toBeInstanceOf(UnsupportedError);
      expect((error as Error).message).toMatch(/declare a lockedUntil column \(lease form\) or remove rate/);
    });
  }

  it('refuses a rate per key, and limits and windows that are not whole numbers, when subscribing', () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    const broker = createBroker(context.db, context.brokers);
    const subscribe = (rate: unknown) => () =>
      broker.subscribe(table.queue('emails'), () => undefined, { rate: rate as { limit: number; perMs: number } });
    expect(subscribe({ limit: 5, perMs: 1_000, key: true })).toThrow(DeclarationError);
    expect(subscribe({ limit: 5, perMs: 1_000, key: true })).toThrow(/rate.key \(a rate per partition key\) is not built/);
    expect(subscribe({ limit: 0, perMs: 1_000 })).toThrow(/rate.limit must be a whole number of claims from 1 to 1000/);
    expect(subscribe({ limit: 5, perMs: 0.5 })).toThrow(/rate.perMs must be a whole number of milliseconds/);
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
    expect(statsOf(broker, queue).rate).toEqual({ limit: 3, perMs: 1_500 });
    const metrics = broker.metrics();
    expect(metrics).toContain('tablequeue_rate_limit{table="jobs",queue="emails"} 3\n');
    expect(metrics).toContain('tablequeue_rate_window_seconds{table="jobs",queue="emails"} 1.5\n');
    expect(metrics).toMatch(/tablequeue_rate_held_back_total\{table="jobs",queue="emails"\} [1-9]\d*\n/);
    await handledAt.waitFor(8);
    await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 20_000, 'every row settled');
  });

  /**
   * 250 rows at 50 per second take four full windows after the first, so a run of about 4 s
   * shows both bounds: the rate is reached, not merely not exceeded (the last row handled within
   * 7 s of the first: 5.4 to 5.8 s measured on a machine shared with other test runs, the windows
   * not filled at once while the replica processes start), and no second holds more than 50 claims. The claims are read from the
   * slots while the run goes: a slot keeps each use for a whole window before the next may
   * replace it, so reading every 100 ms sees every use, and there must be one per row. (Handler
   * starts are not the measure: on a loaded machine a handler starts up to tens of ms after its
   * claim, so starts from two windows can fall within one.)
   */
  it('three replicas with rate 50 per second stay within 50 in any second between them, and reach the rate', async () => {
    const table = defineTable(jobsDeclaration({ form: 'lease' }));
    await createTable(stand, context.db, table);
    await createHandled();
    const rowCount = 250;
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
    let isDrained = false;
    const reading = (async () => {
      while (!isDrained) {
        await readUses();
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
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
      await waitForDatabase(async () => (await countRows(context.db, 'jobs')) === 0, 30_000, 'every row settled');
      isDrained = true;
      await reading;
      await readUses();
      expect(uses.size).toBe(rowCount);
      expect(mostWithinWindow([...uses].map(usedAt), rate.perMs)).toBeLessThanOrEqual(rate.limit);
      const times = await handledTimes();
      expect(times).toHaveLength(rowCount);
      const spanMs = Math.max(...times) - Math.min(...times);
      expect(spanMs).toBeGreaterThanOrEqual(4 * rate.perMs - 40);
      expect(spanMs).toBeLessThan(7 * rate.perMs);
      const pids = await context.db.query<{ pid: unknown }>('SELECT DISTINCT pid FROM handled');
      expect(pids.length).toBeGreaterThan(1);
    } finally {
      isDrained = true;
      await reading;
      for (const replica of replicas) if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGTERM');
      await Promise.all(replicas.map((replica) => replica.exited));
    }
  });
}

function spawnReplica(config: Record<string, unknown>): LineProcess<string> {
  return spawnLineProcess({ script: RATE_LIMITED_REPLICA, config, label: 'rate limited replica', prefix: 'handling ', parse: (id) => id });
}
