import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Broker } from '../../broker/broker.js';
import { defineTable } from '../../definition/define-table.js';
import { ClosedError, ConnectionError, StatementError } from '../../errors.js';
import { createDeferred } from '../../internal/deferred.js';
import { createDriver } from '../create-driver.js';
import type { Connection, Driver } from '../driver.js';
import { BetterSqlite3Driver } from './better-sqlite3-driver.js';

/** A fresh folder for each test of the describe it is called in, removed after the test; the getter reads the current one. */
function temporaryFolderEachTest(prefix: string): () => string {
  let folder: string;
  beforeEach(async () => {
    folder = await mkdtemp(join(tmpdir(), prefix));
  });
  afterEach(async () => {
    await rm(folder, { recursive: true, force: true });
  });
  return () => folder;
}

describe('better-sqlite3 driver on the service\'s own handle', () => {
  const folderOf = temporaryFolderEachTest('tq-handle-');

  it('switches a file handle in the rollback journal to WAL when it opens, and leaves the handle open', async () => {
    const handle = new Database(join(folderOf(), 'app.db'));
    try {
      expect(handle.pragma('journal_mode', { simple: true })).toBe('delete');
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      expect(handle.pragma('journal_mode', { simple: true })).toBe('wal');
      await driver.close();
      expect(handle.open).toBe(true);
    } finally {
      handle.close();
    }
    // WAL belongs to the file: a later connection finds it.
    const reopened = new Database(join(folderOf(), 'app.db'));
    expect(reopened.pragma('journal_mode', { simple: true })).toBe('wal');
    reopened.close();
  });

  it('refuses a file handle it cannot switch, saying how to switch it', async () => {
    const handle = new Database(join(folderOf(), 'app.db'));
    try {
      handle.exec('BEGIN IMMEDIATE');
      const opening = new BetterSqlite3Driver({ database: handle }).open();
      await expect(opening).rejects.toBeInstanceOf(ConnectionError);
      await expect(opening).rejects.toThrow(/could not switch sqlite file .*app\.db to WAL .*db\.pragma\('journal_mode = WAL'\)/);
      handle.exec('ROLLBACK');
      expect(handle.pragma('journal_mode', { simple: true })).toBe('delete');
    } finally {
      handle.close();
    }
  });

  it('leaves a transaction the service opened on its handle to the service when a lent connection ends', async () => {
    const handle = new Database(':memory:');
    try {
      handle.exec('CREATE TABLE items (value INTEGER)');
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      handle.exec('BEGIN');
      handle.exec('INSERT INTO items VALUES (1)');
      // A claim that begins its own transaction finds the service's open, and gives up.
      const connection = await driver.acquire();
      await expect(connection.execute({ name: 'begin', sql: 'BEGIN IMMEDIATE', values: [] })).rejects.toThrow(/within a transaction/);
      connection.release();
      expect(handle.inTransaction).toBe(true);
      handle.exec('COMMIT');
      expect(handle.prepare('SELECT value FROM items').pluck().all()).toEqual([1]);
      await driver.close();
    } finally {
      handle.close();
    }
  });

  it('rolls back a transaction its own connection opened and left open', async () => {
    const handle = new Database(':memory:');
    try {
      handle.exec('CREATE TABLE items (value INTEGER)');
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      const connection = await driver.acquire();
      await connection.execute({ name: 'begin', sql: 'BEGIN IMMEDIATE', values: [] });
      await connection.execute({ name: 'insert', sql: 'INSERT INTO items VALUES (2)', values: [] });
      connection.destroy();
      expect(handle.inTransaction).toBe(false);
      expect(handle.prepare('SELECT value FROM items').pluck().all()).toEqual([]);
      await driver.close();
    } finally {
      handle.close();
    }
  });

  it('leaves an in-memory handle in its own journal mode', async () => {
    const handle = new Database(':memory:');
    try {
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      expect(handle.pragma('journal_mode', { simple: true })).toBe('memory');
      await driver.close();
    } finally {
      handle.close();
    }
  });
});

/** SQLite's `synchronous` levels, as `PRAGMA synchronous` reads them. */
const NORMAL = 1;
const FULL = 2;
const EXTRA = 3;

async function run(connection: Connection, sql: string): Promise<Record<string, unknown>[]> {
  return (await connection.execute({ name: 'test', sql, values: [] })).rows;
}

async function synchronousOf(connection: Connection): Promise<unknown> {
  return (await run(connection, 'PRAGMA synchronous'))[0]!.synchronous;
}

describe('better-sqlite3 driver: what the commits of a loan survive', () => {
  const folderOf = temporaryFolderEachTest('tq-synchronous-');

  it('commits a redeliverable loan at NORMAL on a file it opened, and puts a plain loan back to the level the file opened with', async () => {
    const driver = createDriver(`sqlite:${join(folderOf(), 'queue.db')}`);
    await driver.open();
    try {
      const plain = await driver.acquire();
      expect(await synchronousOf(plain)).toBe(FULL);
      await run(plain, 'CREATE TABLE items (value INTEGER)');
      plain.release();

      const redeliverable = await driver.acquire({ commitDurability: 'redeliverable' });
      await run(redeliverable, 'INSERT INTO items VALUES (1)');
      expect(await synchronousOf(redeliverable)).toBe(NORMAL);
      redeliverable.release();

      // Read inside the transaction, where nothing switches: the level the INSERT commits at.
      const durable = await driver.acquire();
      await run(durable, 'BEGIN IMMEDIATE');
      expect(await synchronousOf(durable)).toBe(FULL);
      await run(durable, 'INSERT INTO items VALUES (2)');
      await run(durable, 'COMMIT');
      expect(await synchronousOf(durable)).toBe(FULL);
      expect(await run(durable, 'SELECT value FROM items ORDER BY value')).toEqual([{ value: 1 }, { value: 2 }]);
      durable.release();
    } finally {
      await driver.close();
    }
  });

  it('commits plain loans at FULL on a file that was already in WAL mode, which better-sqlite3 opens at NORMAL', async () => {
    const file = join(folderOf(), 'queue.db');
    const setup = new Database(file);
    setup.pragma('journal_mode = WAL');
    setup.exec('CREATE TABLE items (value INTEGER)');
    setup.close();
    const reopened = new Database(file);
    expect(reopened.pragma('synchronous', { simple: true })).toBe(NORMAL);
    reopened.close();

    const driver = createDriver(`sqlite:${file}`);
    await driver.open();
    try {
      const plain = await driver.acquire();
      await run(plain, 'INSERT INTO items VALUES (1)');
      expect(await synchronousOf(plain)).toBe(FULL);
      plain.release();
      const redeliverable = await driver.acquire({ commitDurability: 'redeliverable' });
      await run(redeliverable, 'INSERT INTO items VALUES (2)');
      expect(await synchronousOf(redeliverable)).toBe(NORMAL);
      redeliverable.release();
    } finally {
      await driver.close();
    }
  });

  it('switches before the BEGIN of a redeliverable loan, and leaves its transaction at NORMAL to its end', async () => {
    const driver = createDriver(`sqlite:${join(folderOf(), 'queue.db')}`);
    await driver.open();
    try {
      await driver.execute({ name: 'create', sql: 'CREATE TABLE items (value INTEGER)', values: [] });
      const redeliverable = await driver.acquire({ commitDurability: 'redeliverable' });
      await run(redeliverable, 'BEGIN IMMEDIATE');
      await run(redeliverable, 'INSERT INTO items VALUES (1)');
      // A switch inside the transaction would fail: "Safety level may not be changed inside a transaction".
      expect(await synchronousOf(redeliverable)).toBe(NORMAL);
      await run(redeliverable, 'COMMIT');
      redeliverable.release();

      // One left open is rolled back as its loan ends, and the next loan switches as usual.
      const abandoned = await driver.acquire({ commitDurability: 'redeliverable' });
      await run(abandoned, 'BEGIN IMMEDIATE');
      await run(abandoned, 'INSERT INTO items VALUES (2)');
      abandoned.destroy();
      const durable = await driver.acquire();
      expect(await synchronousOf(durable)).toBe(FULL);
      expect(await run(durable, 'SELECT value FROM items')).toEqual([{ value: 1 }]);
      durable.release();
    } finally {
      await driver.close();
    }
  });

  it("never changes the level of the service's own handle", async () => {
    const handle = new Database(join(folderOf(), 'app.db'));
    try {
      handle.pragma('journal_mode = WAL');
      handle.pragma(`synchronous = ${EXTRA}`);
      const driver = createDriver(handle);
      await driver.open();
      const redeliverable = await driver.acquire({ commitDurability: 'redeliverable' });
      await run(redeliverable, 'CREATE TABLE items (value INTEGER)');
      await run(redeliverable, 'INSERT INTO items VALUES (1)');
      expect(handle.pragma('synchronous', { simple: true })).toBe(EXTRA);
      redeliverable.release();
      await driver.close();
      expect(handle.pragma('synchronous', { simple: true })).toBe(EXTRA);
    } finally {
      handle.close();
    }
  });

  it('leaves an in-memory database at its own level', async () => {
    const driver = createDriver('sqlite::memory:');
    await driver.open();
    try {
      const plain = await driver.acquire();
      const level = await synchronousOf(plain);
      plain.release();
      const redeliverable = await driver.acquire({ commitDurability: 'redeliverable' });
      await run(redeliverable, 'CREATE TABLE items (value INTEGER)');
      expect(await synchronousOf(redeliverable)).toBe(level);
      redeliverable.release();
    } finally {
      await driver.close();
    }
  });

  it.each([
    { mode: 'lease', transactional: false },
    { mode: 'transactional lease', transactional: true },
  ])('drains a $mode subscription on a file, every message acked', async ({ transactional }) => {
    const file = join(folderOf(), 'queue.db');
    const table = defineTable({ table: 'jobs', id: 'id', attempt: 'attempt', payload: 'payload', lockedUntil: 'locked_until' });
    const setup = new Database(file);
    for (const sql of table.createTableSql('sqlite')) setup.exec(sql);
    setup.exec('CREATE TABLE handled (value INTEGER)');
    setup.close();
    const queue = table.queue<{ value: number }>('work');
    const count = 300;
    const broker = new Broker({ database: `sqlite:${file}`, pollIntervalMs: 50, stopTimeoutMs: 5_000 });
    const drained = createDeferred();
    let handled = 0;
    broker.subscribe(
      queue,
      async (message, context) => {
        await context.tx?.query('INSERT INTO handled VALUES (?)', [message.payload.value]);
        handled += 1;
        if (handled === count) drained.resolve();
      },
      { workers: 4, transactional },
    );
    await broker.start();
    try {
      await broker.publishMany(queue, Array.from({ length: count }, (_, value) => ({ payload: { value } })));
      await drained.promise;
    } finally {
      await broker.stop();
    }
    const after = new Database(file, { readonly: true });
    try {
      expect(after.prepare('SELECT count(*) FROM jobs').pluck().get()).toBe(0);
      expect(after.prepare('SELECT count(*) FROM handled').pluck().get()).toBe(transactional ? count : 0);
    } finally {
      after.close();
    }
    expect(broker.stats().subscriptions[0]!.acked).toBe(count);
  });
});

describe('better-sqlite3 driver: writes that wait for the handle together commit together', () => {
  const folderOf = temporaryFolderEachTest('tq-group-commit-');

  const insert = (value: number) => ({ name: `insert ${value}`, sql: 'INSERT INTO items VALUES (?)', values: [value] });

  /** A driver on a file of its own holding `items`, closed after `work`. */
  async function withItemsFile(work: (driver: Driver) => Promise<void>): Promise<void> {
    const driver = createDriver(`sqlite:${join(folderOf(), 'queue.db')}`);
    await driver.open();
    try {
      await driver.execute({ name: 'create', sql: 'CREATE TABLE items (value INTEGER PRIMARY KEY)', values: [] });
      await work(driver);
    } finally {
      await driver.close();
    }
  }

  async function itemsOf(driver: Driver): Promise<unknown[]> {
    const read = await driver.execute({ name: 'read', sql: 'SELECT value FROM items ORDER BY value', values: [] });
    return read.rows.map((row) => row.value);
  }

  /** Pages in the write-ahead log: every commit appends the pages it changed. */
  async function logFrames(connection: Connection): Promise<number> {
    return Number((await run(connection, 'PRAGMA wal_checkpoint(PASSIVE)'))[0]!.log);
  }

  it('commits the writes waiting while the handle is lent in one transaction, each with its own result', async () => {
    await withItemsFile(async (driver) => {
      await driver.execute({ name: 'stop checkpoints', sql: 'PRAGMA wal_autocheckpoint = 0', values: [] });
      const frames = async () => {
        const connection = await driver.acquire();
        try {
          return await logFrames(connection);
        } finally {
          connection.release();
        }
      };

      const before = await frames();
      for (const value of [1, 2, 3]) await driver.executeWrite(insert(value), { commitDurability: 'redeliverable' });
      const alone = (await frames()) - before;

      const held = await driver.acquire();
      const writes = [4, 5, 6].map((value) => driver.executeWrite(insert(value), { commitDurability: 'redeliverable' }));
      held.release();
      expect((await Promise.all(writes)).map((result) => result.affectedRows)).toEqual([1, 1, 1]);
      const together = (await frames()) - before - alone;

      expect(together).toBeLessThan(alone);
      expect(await itemsOf(driver)).toEqual([1, 2, 3, 4, 5, 6]);
    });
  });

  it('rolls back only the write that failed: the others waiting with it commit, and it fails with its own statement named', async () => {
    await withItemsFile(async (driver) => {
      await driver.execute(insert(1));
      const held = await driver.acquire();
      const writes = [
        driver.executeWrite(insert(2)),
        // Its first row goes in before its second fails: that row must not commit either.
        driver.executeWrite({ name: 'insert 3 and 1', sql: 'INSERT INTO items VALUES (3), (1)', values: [] }),
        driver.executeWrite(insert(4)),
      ];
      held.release();
      const outcomes = await Promise.allSettled(writes);
      expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      const failure = (outcomes[1] as PromiseRejectedResult).reason as StatementError;
      expect(failure).toBeInstanceOf(StatementError);
      expect(failure.statement).toBe('insert 3 and 1');
      expect(failure.sqlState).toBe('SQLITE_CONSTRAINT_PRIMARYKEY');
      expect(await itemsOf(driver)).toEqual([1, 2, 4]);
    });
  });

  it("runs writes that find the service's transaction open on its handle inside that transaction, as single statements do", async () => {
    const handle = new Database(':memory:');
    try {
      handle.exec('CREATE TABLE items (value INTEGER)');
      const driver = new BetterSqlite3Driver({ database: handle });
      await driver.open();
      handle.exec('BEGIN');
      const held = await driver.acquire();
      const writes = [1, 2].map((value) => driver.executeWrite(insert(value)));
      held.release();
      await Promise.all(writes);
      expect(handle.inTransaction).toBe(true);
      handle.exec('ROLLBACK');
      expect(handle.prepare('SELECT count(*) FROM items').pluck().get()).toBe(0);
      await driver.close();
    } finally {
      handle.close();
    }
  });

  it('fails the writes still waiting for the handle when the driver closes', async () => {
    const driver = createDriver('sqlite::memory:');
    await driver.open();
    await driver.execute({ name: 'create', sql: 'CREATE TABLE items (value INTEGER)', values: [] });
    await driver.acquire();
    const writes = [1, 2].map((value) => driver.executeWrite(insert(value)));
    await driver.close();
    for (const write of writes) await expect(write).rejects.toBeInstanceOf(ClosedError);
  });
});
