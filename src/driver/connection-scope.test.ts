import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Statement } from '../statement.js';
import { BetterSqlite3Driver } from './better-sqlite3/better-sqlite3-driver.js';
import { inTransaction, withConnection, withTransaction, type TransactionStatements } from './connection-scope.js';
import type { Connection, Driver } from './driver.js';

const text = (name: string, sql: string): Statement => ({ name, sql, params: [] });
const SESSION: TransactionStatements = {
  begin: [text('session.begin', 'BEGIN IMMEDIATE')],
  commit: text('session.commit', 'COMMIT'),
  rollback: text('session.rollback', 'ROLLBACK'),
};
const insertRow = (value: number) => ({ name: 'insert', sql: 'INSERT INTO items (value) VALUES (?)', values: [value] });

/** A real SQLite driver whose lent connections record how their loan ended. */
function recordingDriver(driver: Driver): { driver: Pick<Driver, 'acquire'>; endings: string[] } {
  const endings: string[] = [];
  return {
    endings,
    driver: {
      acquire: async (options) => {
        const connection = await driver.acquire(options);
        const recorded: Connection = {
          execute: (statement) => connection.execute(statement),
          prepare: (statement) => connection.prepare(statement),
          release: () => {
            endings.push('release');
            connection.release();
          },
          destroy: () => {
            endings.push('destroy');
            connection.destroy();
          },
        };
        return recorded;
      },
    },
  };
}

describe('withConnection, withTransaction and inTransaction', () => {
  let sqlite: BetterSqlite3Driver;
  const values = async () =>
    (await sqlite.execute({ name: 'select', sql: 'SELECT value FROM items ORDER BY value', values: [] })).rows.map((row) => row['value']);

  beforeEach(async () => {
    sqlite = new BetterSqlite3Driver({ url: { kind: 'sqlite', filename: ':memory:', isMemory: true } });
    await sqlite.open();
    await sqlite.execute({ name: 'create', sql: 'CREATE TABLE items (value INTEGER NOT NULL)', values: [] });
  });
  afterEach(async () => {
    await sqlite.close();
  });

  it('releases the connection after work that resolves, and destroys it after work that throws', async () => {
    const { driver, endings } = recordingDriver(sqlite);
    await expect(withConnection(driver, async (connection) => (await connection.execute(insertRow(1))).affectedRows)).resolves.toBe(1);
    await expect(
      withConnection(driver, async () => {
        throw new Error('work failed');
      }),
    ).rejects.toThrow('work failed');
    expect(endings).toEqual(['release', 'destroy']);
  });

  it('leaves a kept connection to whoever took it, and still destroys it when the work throws', async () => {
    const { driver, endings } = recordingDriver(sqlite);
    const kept = await withConnection(driver, async (connection, keep) => {
      keep();
      return connection;
    });
    expect(endings).toEqual([]);
    kept.release();
    await expect(
      withConnection(driver, async (_connection, keep) => {
        keep();
        throw new Error('handing on failed');
      }),
    ).rejects.toThrow('handing on failed');
    expect(endings).toEqual(['release', 'destroy']);
  });

  it('commits what the work wrote, and rolls back what work that throws wrote, releasing the connection each time', async () => {
    const { driver, endings } = recordingDriver(sqlite);
    await withTransaction(driver, SESSION, async (_transaction, connection) => {
      await connection.execute(insertRow(1));
    });
    await expect(
      withTransaction(driver, SESSION, async (_transaction, connection) => {
        await connection.execute(insertRow(2));
        throw new Error('work failed');
      }),
    ).rejects.toThrow('work failed');
    expect(await values()).toEqual([1]);
    expect(endings).toEqual(['release', 'destroy']);
  });

  it('commits nothing after the work rolled back itself, and rolls back only once', async () => {
    const { driver } = recordingDriver(sqlite);
    const answer = await withTransaction(driver, SESSION, async (transaction, connection) => {
      await connection.execute(insertRow(3));
      await transaction.rollBack();
      await transaction.rollBack();
      return 'rolled back';
    });
    expect(answer).toBe('rolled back');
    expect(await values()).toEqual([]);
  });

  it('destroys the connection when the rollback after a failure fails too, and throws the work\'s error', async () => {
    const { driver, endings } = recordingDriver(sqlite);
    const connection = await driver.acquire();
    await expect(
      inTransaction(connection, SESSION, async (_transaction, inside) => {
        // The work ends the transaction behind the helper's back, so its ROLLBACK finds none.
        await inside.execute({ name: 'commit', sql: 'COMMIT', values: [] });
        throw new Error('work failed');
      }),
    ).rejects.toThrow('work failed');
    expect(endings).toEqual(['destroy']);
  });

  it('answers for a BEGIN the session refuses when asked to, and throws the refusal otherwise', async () => {
    const { driver } = recordingDriver(sqlite);
    const connection = await driver.acquire();
    // The session is in a transaction the helper did not open (a service's, on a shared handle).
    await connection.execute({ name: 'begin', sql: 'BEGIN', values: [] });
    await expect(inTransaction(connection, SESSION, async () => 'ran', { whenBeginRefused: () => 'not begun' })).resolves.toBe(
      'not begun',
    );
    await expect(inTransaction(connection, SESSION, async () => 'ran')).rejects.toThrow(/within a transaction/);
    connection.release();
  });
});
