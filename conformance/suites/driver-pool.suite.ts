import { setImmediate as nextTurn } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { expect, it, vi } from 'vitest';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { isConnectionLost } from '../../src/driver/connection-loan.js';
import { executeAll } from '../../src/driver/connection-scope.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { Connection, Driver } from '../../src/driver/driver.js';
import { ClosedError, DeclarationError, StatementError } from '../../src/errors.js';
import { bindStatement } from '../../src/statement.js';
import { type DriverTestContext, expectUtcTimes, firstRow, statement } from './driver-test-context.js';
import { openServicePools, sqliteFileOf } from './service-pools.js';

/** Lending, ending and counting connections; pools and handles the service owns. */
export function driverPoolSuite(context: DriverTestContext): void {
  const { stand, sql, placeholder: p } = context;
  const isServer = sql.sessionId !== undefined;
  const insert = (name: string) => statement('test.insert', `INSERT INTO items (name) VALUES (${p(1)})`, [name]);
  const names = async () => (await context.db.query<{ name: string }>('SELECT name FROM items ORDER BY name')).map((row) => row.name);
  /** Ends a session from the admin connection and waits until the server no longer runs it. */
  const killSession = async (session: string) => {
    await context.db.query(sql.killSession ?? '', [session]);
    await vi.waitFor(
      async () => {
        const [row] = await context.db.query<{ n: unknown }>(sql.countSessions ?? '', [session]);
        expect(Number(row?.n)).toBe(0);
      },
      { timeout: 5_000 },
    );
  };
  const sessionOf = async (runner: Pick<Driver, 'execute'>) =>
    String(firstRow(await runner.execute(statement('test.session', sql.sessionId ?? '')))['session']);

  it('stats count held connections, the most held at once, and spare ones', async () => {
    const driver = await context.openDriver({ poolSize: 3 });
    const { size } = driver.stats();
    expect(size).toBe(stand.capabilities.hasSingleWriter ? 1 : 3);
    const held: Connection[] = [];
    for (let index = 0; index < size; index += 1) held.push(await driver.acquire());
    expect(driver.stats()).toMatchObject({ held: size, maxHeld: size, idle: 0, spare: 0 });

    let waiter: Connection | undefined;
    const waiting = driver.acquire().then((connection) => (waiter = connection));
    await nextTurn();
    expect(waiter).toBeUndefined();
    expect(driver.stats().spare).toBe(0);
    held.pop()?.release();
    const handedOn = await waiting;
    expect(driver.stats()).toMatchObject({ held: size, maxHeld: size });

    handedOn.release();
    handedOn.release();
    handedOn.destroy();
    expect(driver.stats()).toMatchObject({ held: size - 1, maxHeld: size, spare: 1 });
    for (const connection of held) connection.release();
    expect(driver.stats()).toMatchObject({ held: 0, maxHeld: size, spare: size });
  });

  it('destroy ends the session: its transaction rolls back and its locks go', async () => {
    await context.db.query(`INSERT INTO items (name) VALUES (${p(1)})`, ['kept']);
    const driver = await context.openDriver({ poolSize: 2 });
    const holder = await driver.acquire();
    await holder.execute(statement('test.begin', sql.begin));
    await holder.execute(statement('test.lock', `UPDATE items SET name = ${p(1)} WHERE name = ${p(2)}`, ['changed', 'kept']));
    holder.destroy();
    // Waits for the row lock if the session lived on; finds 'kept' only if its update rolled back.
    const after = await driver.execute(
      statement('test.update', `UPDATE items SET name = ${p(1)} WHERE name = ${p(2)}`, ['after', 'kept']),
    );
    expect(after.affectedRows).toBe(1);
    await expect(holder.execute(insert('too late'))).rejects.toThrowError(/already released or destroyed/);
  });

  it.skipIf(!isServer)('a released connection is reused; a destroyed one is not', async () => {
    const driver = await context.openDriver({ poolSize: 1 });
    const first = await driver.acquire();
    const session = await sessionOf(first);
    first.release();
    const second = await driver.acquire();
    expect(await sessionOf(second)).toBe(session);
    second.destroy();
    const third = await driver.acquire();
    expect(await sessionOf(third)).not.toBe(session);
    third.release();
  });

  it.skipIf(!isServer)('a session the server ended fails as connection lost, is destroyed, and the pool reconnects', async () => {
    const driver = await context.openDriver({ poolSize: 1 });
    const connection = await driver.acquire();
    const session = await sessionOf(connection);
    // The client hears of it while lent and idle: that must not crash the process.
    await killSession(session);
    const failure = await connection.execute(statement('test.after-kill', 'SELECT 1 AS one')).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StatementError);
    expect(isConnectionLost(failure)).toBe(true);
    connection.release();
    expect(await sessionOf(driver)).not.toBe(session);
  });

  it.skipIf(!isServer)('an idle session the server ended leaves the pool without crashing the process', async () => {
    const driver = await context.openDriver({ poolSize: 1 });
    const session = await sessionOf(driver);
    expect(driver.stats().idle).toBe(1);
    await killSession(session);
    await vi.waitFor(() => expect(driver.stats().idle).toBe(0), { timeout: 5_000 });
    expect(await sessionOf(driver)).not.toBe(session);
  });

  it('a driver that opened its pool closes it and refuses work afterwards', async () => {
    const driver = await context.openDriver();
    expect(driver.ownsPool).toBe(stand.name !== 'sqlite-memory');
    await driver.close();
    await driver.close();
    await expect(driver.acquire()).rejects.toThrowError(ClosedError);
    await expect(driver.execute(statement('test.closed', 'SELECT 1 AS one'))).rejects.toThrowError(ClosedError);
  });

  it('a pool or handle the service passed is used as it is and never closed', async () => {
    for (const pool of openServicePools(stand, context.db)) {
      try {
        const driver = createDriver(pool.database, { poolSize: 99 });
        expect(driver.ownsPool, pool.label).toBe(false);
        await driver.open();
        expect(driver.stats().size, pool.label).toBeLessThan(99);
        await expectUtcTimes(context, driver);
        await context.db.exec('DELETE FROM items');
        // BEGIN, the statements and COMMIT written together where the service's pool pipelines.
        const connection = await driver.acquire();
        const begin = createDialect(stand.kind).session.begin(stand.kind === 'sqlite' ? {} : { isolation: 'read committed' });
        const commit = createDialect(stand.kind).session.commit();
        await executeAll(connection, [...begin.map((each) => bindStatement(each, {})), insert(pool.label), bindStatement(commit, {})]);
        connection.release();
        expect(await names(), pool.label).toEqual([pool.label]);
        await context.db.exec('DELETE FROM items');
        await driver.close();
        await expect(pool.ping(), pool.label).resolves.toBeUndefined();
      } finally {
        await pool.end();
      }
    }
  });

  it("statements run inside the service's transaction on the connection it passes", async () => {
    const driver = await context.openDriver({ poolSize: 2 });
    for (const pool of openServicePools(stand, context.db)) {
      try {
        for (const how of ['ROLLBACK', 'COMMIT'] as const) {
          const transaction = await pool.beginTransaction();
          const adopted = driver.adopt(transaction.connection);
          await adopted.execute(insert(`${pool.label} ${how}`));
          expect(driver.stats().held, 'an adopted connection is not counted').toBe(0);
          adopted.release();
          await transaction.finish(how);
        }
      } finally {
        await pool.end();
      }
    }
    const committed = await names();
    expect(committed.every((name) => name.endsWith('COMMIT'))).toBe(true);
    expect(committed.length).toBeGreaterThan(0);
    const own = await driver.acquire();
    expect(driver.adopt(own)).toBe(own);
    own.release();
    expect(() => driver.adopt({ query: 'not a client' })).toThrowError(DeclarationError);
  });

  it.skipIf(!stand.capabilities.hasSingleWriter)(
    "a transaction on the one handle never interleaves with another connection's statements",
    async () => {
      const driver = await context.openDriver();
      const holder = await driver.acquire();
      await holder.execute(statement('test.begin', sql.begin));
      await holder.execute(insert('inside'));
      let counted: number | undefined;
      const counting = driver
        .execute(statement('test.count', 'SELECT COUNT(*) AS n FROM items'))
        .then((result) => (counted = Number(firstRow(result)['n'])));
      await nextTurn();
      expect(counted).toBeUndefined();
      await holder.execute(statement('test.rollback', 'ROLLBACK'));
      holder.release();
      await counting;
      expect(counted).toBe(0);
    },
  );

  it.skipIf(!(stand.kind === 'sqlite' && stand.capabilities.supportsProcesses))(
    "a write that meets another handle's write lock waits without blocking the event loop, then succeeds",
    async () => {
      const driver = await context.openDriver();
      const other = new Database(sqliteFileOf(context.db), { timeout: 0 });
      try {
        other.exec('BEGIN IMMEDIATE');
        let isWritten = false;
        const writing = driver.execute(insert('waited')).then((result) => {
          isWritten = true;
          return result;
        });
        // The first attempt runs before the event loop turns, so it has met the lock by now; the
        // loop keeps turning while the write waits for it.
        for (let turn = 0; turn < 20; turn += 1) await nextTurn();
        expect(isWritten).toBe(false);
        other.exec('COMMIT');
        await expect(writing).resolves.toMatchObject({ affectedRows: 1 });
      } finally {
        other.close();
      }
      expect(await names()).toEqual(['waited']);
    },
  );
}
