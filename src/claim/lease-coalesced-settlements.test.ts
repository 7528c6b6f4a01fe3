import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDialect } from '../dialect/create-dialect.js';
import { createDriver } from '../driver/create-driver.js';
import type { Connection, Driver } from '../driver/driver.js';
import type { AcquireOptions } from '../driver/pool-gate.js';
import type { BoundStatement } from '../statement.js';
import { createTableSpec } from '../table/table-spec.js';
import { LeaseSlot } from './lease-book.js';
import { LeaseCoalescedSettlements } from './lease-coalesced-settlements.js';

const spec = createTableSpec({ table: 'jobs', id: 'id', retryAfter: 'due', lockedUntil: 'locked_until' });
const columns = ['id', 'due', 'locked_until'];
const TOKEN = new Date('2030-01-01T00:00:00.000Z');
const OTHER_TOKEN = new Date('2030-01-01T00:00:05.000Z');

/** Counts the statements a real driver runs, by name. */
function countingDriver(driver: Driver, names: string[]): Driver {
  const wrap = (connection: Connection): Connection => ({
    execute: (statement: BoundStatement) => {
      names.push(statement.name);
      return connection.execute(statement);
    },
    prepare: (statement) => connection.prepare(statement),
    release: () => connection.release(),
    destroy: () => connection.destroy(),
  });
  return Object.assign(Object.create(driver) as Driver, {
    acquire: async () => wrap(await driver.acquire()),
    executeWrite: (statement: BoundStatement, options?: AcquireOptions) => {
      names.push(statement.name);
      return driver.executeWrite(statement, options);
    },
  });
}

async function exec(driver: Driver, sql: string, values: unknown[] = []): Promise<Record<string, unknown>[]> {
  return (await driver.execute({ name: 'test', sql, values })).rows;
}

describe('LeaseCoalescedSettlements on SQLite in memory', () => {
  let driver: Driver;
  const names: string[] = [];

  beforeEach(async () => {
    names.length = 0;
    driver = createDriver('sqlite::memory:');
    await driver.open();
    await exec(driver, 'CREATE TABLE jobs (id INTEGER PRIMARY KEY, due TEXT, locked_until TEXT)');
    for (const id of [1, 2, 3, 4]) {
      await exec(driver, 'INSERT INTO jobs (id, due, locked_until) VALUES (?, NULL, ?)', [id, '2030-01-01T00:00:00.000+00:00']);
    }
  });

  afterEach(async () => {
    await driver.close();
  });

  function settlements(windowMs: number): LeaseCoalescedSettlements {
    return new LeaseCoalescedSettlements({
      driver: countingDriver(driver, names),
      dialect: createDialect('sqlite'),
      spec,
      columns,
      deadLetter: undefined,
      windowMs,
    });
  }

  it('settles a window in one statement, and only the row whose token moved hears notCarried', async () => {
    const coalesced = settlements(1_000);
    const slots = [1, 2, 3].map((id) => new LeaseSlot(String(id), id, TOKEN));
    slots[1]!.token = OTHER_TOKEN;
    const answers = slots.map((slot) => coalesced.settle(slot, { kind: 'finish' }));
    await coalesced.flushNow();
    expect(await Promise.all(answers)).toEqual(['settled', 'notCarried', 'settled']);
    expect(names).toEqual(['lease.settleMany.finish']);
    expect((await exec(driver, 'SELECT id FROM jobs ORDER BY id')).map((row) => row.id)).toEqual([2, 4]);
  });

  it('delays each row to its own time, and releases beside it in a statement of its own kind', async () => {
    const coalesced = settlements(1_000);
    const first = coalesced.settle(new LeaseSlot('1', 1, TOKEN), {
      kind: 'retryAfter',
      at: new Date('2031-01-01T00:00:00.000Z'),
      delayMs: 1,
    });
    const second = coalesced.settle(new LeaseSlot('2', 2, TOKEN), {
      kind: 'retryAfter',
      at: new Date('2032-01-01T00:00:00.000Z'),
      delayMs: 1,
    });
    const third = coalesced.settle(new LeaseSlot('3', 3, TOKEN), { kind: 'retry' });
    await coalesced.flushNow();
    expect([await first, await second, await third]).toEqual(['settled', 'settled', 'settled']);
    expect(names.sort()).toEqual(['lease.settleMany.release', 'lease.settleMany.retryAfter']);
    expect(await exec(driver, 'SELECT id, due, locked_until FROM jobs ORDER BY id')).toEqual([
      { id: 1, due: '2031-01-01T00:00:00.000+00:00', locked_until: null },
      { id: 2, due: '2032-01-01T00:00:00.000+00:00', locked_until: null },
      { id: 3, due: null, locked_until: null },
      { id: 4, due: null, locked_until: '2030-01-01T00:00:00.000+00:00' },
    ]);
  });

  it('answers failed to every settlement of a statement that failed, having changed nothing', async () => {
    const coalesced = settlements(1_000);
    await exec(driver, 'CREATE TRIGGER refuse BEFORE DELETE ON jobs WHEN old.id = 2 BEGIN SELECT RAISE(ABORT, \'refused\'); END');
    const answers = [1, 2].map((id) => coalesced.settle(new LeaseSlot(String(id), id, TOKEN), { kind: 'finish' }));
    await coalesced.flushNow();
    expect(await Promise.all(answers)).toEqual(['failed', 'failed']);
    expect(await exec(driver, 'SELECT COUNT(*) AS n FROM jobs')).toEqual([{ n: 4 }]);
  });

  it('lists the one-row shape of every kind for the start-up check', () => {
    expect(settlements(1).statements.map((statement) => statement.name)).toEqual([
      'lease.settleMany.finish',
      'lease.settleMany.release',
      'lease.settleMany.retryAfter',
      'lease.settleMany.release',
    ]);
  });
});
