import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDialect } from '../../src/dialect/create-dialect.js';
import { isConnectionLost } from '../../src/driver/connection-loan.js';
import { executeAll } from '../../src/driver/connection-scope.js';
import { createDriver } from '../../src/driver/create-driver.js';
import type { DatabaseKind } from '../../src/driver/driver.js';
import { ConnectionError, StatementError } from '../../src/errors.js';
import { bindStatement } from '../../src/statement.js';
import type { Stand, TestDatabase } from '../stand.js';
import { driverPoolSuite } from './driver-pool.suite.js';
import { DRIVER_TEST_SQL, type DriverTestContext, expectUtcTimes, statement } from './driver-test-context.js';

/** Registers the driver behaviour every database must show, against one stand. */
export function driverSuite(stand: Stand): void {
  describe(`${stand.name} driver`, () => {
    const context: DriverTestContext = {
      stand,
      sql: DRIVER_TEST_SQL[stand.kind],
      db: undefined as unknown as TestDatabase,
      openDriver: (options) => context.db.openDriver(options),
      placeholder: (index) => (stand.kind === 'postgres' ? `$${index}` : '?'),
    };
    const { sql, placeholder: p } = context;

    beforeEach(async () => {
      context.db = await stand.createDatabase();
      await context.db.exec(sql.createItems);
    });
    afterEach(() => context.db.drop());

    it('open() on a server that does not answer fails with ConnectionError naming where, never the password', async () => {
      const target = await unreachableUrl(stand.kind, context.db);
      const driver = createDriver(target.url);
      const failure = await driver.open().catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(ConnectionError);
      expect((failure as ConnectionError).host).toBe(target.host);
      expect((failure as Error).message).toContain(target.host);
      expect(String((failure as Error).stack)).not.toContain(UNSHOWN_PASSWORD);
      await driver.close();
    });

    it('execute returns rows, affected rows and columns, and binds every kind of value', async () => {
      const driver = await context.openDriver();
      const body = Buffer.from([0, 1, 2, 254, 255]);
      const insertTwo = `INSERT INTO items (name, due_at, body) VALUES (${p(1)}, ${p(2)}, ${p(3)}), (${p(4)}, ${p(5)}, ${p(6)})`;
      const inserted = await driver.execute(
        statement('test.insert', insertTwo, ['first', undefined, body, 'second', null, null]),
      );
      expect(inserted).toMatchObject({ rows: [], affectedRows: 2, columns: [] });
      // MySQL reports the first generated id as a decimal string; elsewhere ids come back by RETURNING.
      expect(inserted.insertId).toBe(stand.kind === 'mysql' ? '1' : undefined);

      const selected = await driver.execute(
        statement('test.select', `SELECT id, name, due_at, body FROM items ORDER BY id LIMIT ${p(1)}`, [1]),
      );
      expect(selected.columns).toEqual(['id', 'name', 'due_at', 'body']);
      // BIGINT ids are strings on Postgres and MySQL; SQLite's INTEGER ids are numbers.
      expect(selected.rows).toEqual([{ id: stand.kind === 'sqlite' ? 1 : '1', name: 'first', due_at: null, body }]);

      const updated = await driver.execute(statement('test.update', `UPDATE items SET name = name WHERE id >= ${p(1)}`, [1]));
      expect(updated).toMatchObject({ rows: [], affectedRows: 2 }); // matched rows, though nothing changed

      const deleted = await driver.execute(
        statement('test.delete', `DELETE FROM items WHERE name = ${p(1)} RETURNING name`, ['second']),
      );
      expect(deleted).toEqual({ rows: [{ name: 'second' }], affectedRows: 1, columns: ['name'] });
    });

    it('a failed statement is a StatementError with its SQLSTATE and caller, never its values', async () => {
      const driver = await context.openDriver();
      const secret = 'secret-value-4711';
      const bad = statement('test.syntax', `SELEC name FROM items WHERE name = ${p(1)}`, [secret]);
      const viaDriver = await driver.execute(bad).catch((error: unknown) => error);
      const connection = await driver.acquire();
      const viaConnection = await connection.execute(bad).catch((error: unknown) => error);
      connection.release();
      for (const failure of [viaDriver, viaConnection]) {
        expect(failure).toBeInstanceOf(StatementError);
        // Errors name the server as it is: MariaDB, reached through the mysql driver, as mariadb.
        const server = stand.kind === 'mysql' ? stand.name : stand.kind;
        expect(failure).toMatchObject({ statement: 'test.syntax', database: server, ...sql.syntaxError });
        expect((failure as Error).message).toContain('"test.syntax"');
        expect((failure as Error).message).not.toContain(secret);
        expect((failure as Error).stack).toContain('driver.suite');
        expect(isConnectionLost(failure)).toBe(false);
      }
      // A statement the server refused leaves its connection whole.
      await expect(driver.execute(statement('test.after', 'SELECT 1 AS one'))).resolves.toMatchObject({ rows: [{ one: 1 }] });
    });

    it('executeAll runs statements in order and answers each; a failure rejects with its own error and commits nothing', async () => {
      const driver = await context.openDriver();
      const session = createDialect(stand.kind).session;
      const begin = session.begin(stand.kind === 'sqlite' ? { sqliteBegin: 'immediate' } : { isolation: 'read committed' }).map((each) => bindStatement(each, {}));
      const commit = bindStatement(session.commit(), {});
      const insert = (name: string) => statement('test.insert', `INSERT INTO items (name) VALUES (${p(1)})`, [name]);
      const count = statement('test.count', 'SELECT COUNT(*) AS n FROM items');
      const connection = await driver.acquire();
      const results = await executeAll(connection, [...begin, insert('a'), insert('b'), count, commit]);
      connection.release();
      expect(results).toHaveLength(begin.length + 4);
      expect(results.slice(begin.length, begin.length + 2).map((result) => result.affectedRows)).toEqual([1, 1]);
      expect(Number(results[begin.length + 2]!.rows[0]!['n'])).toBe(2);

      const failing = await driver.acquire();
      const missing = statement('test.missing', `INSERT INTO missing_table (name) VALUES (${p(1)})`, ['c']);
      const failure = await executeAll(failing, [...begin, insert('c'), missing, commit]).catch((error: unknown) => error);
      failing.destroy();
      expect(failure).toBeInstanceOf(StatementError);
      expect(failure).toMatchObject({ statement: 'test.missing' });
      // Sent at once or one by one, the insert before the failure never commits.
      expect(await context.db.query('SELECT name FROM items ORDER BY name')).toEqual([{ name: 'a' }, { name: 'b' }]);
    });

    it('prepare checks a statement on the server without running it', async () => {
      const driver = await context.openDriver();
      const connection = await driver.acquire();
      const insert = statement('test.prepare-insert', `INSERT INTO items (name) VALUES (${p(1)})`, ['after']);
      try {
        await connection.prepare(insert);
        const missing = await connection
          .prepare(statement('test.prepare-missing', `SELECT name FROM missing_table WHERE id = ${p(1)}`))
          .catch((error: unknown) => error);
        expect(missing).toBeInstanceOf(StatementError);
        expect(missing).toMatchObject({ statement: 'test.prepare-missing', ...sql.missingTable });
        expect(await context.db.query('SELECT name FROM items')).toEqual([]);
        // The same text still runs on the connection that checked it.
        await connection.execute(insert);
      } finally {
        connection.release();
      }
      expect(await context.db.query('SELECT name FROM items')).toEqual([{ name: 'after' }]);
    });

    it('Dates are written in UTC and compare as instants, with the database clock too', async () => {
      const driver = await context.openDriver();
      await expectUtcTimes(context, driver);
    });

    it.runIf(stand.kind === 'postgres')('Postgres: an array of Dates binds each in UTC, one Date given many times and others between', async () => {
      const driver = await context.openDriver();
      const token = new Date('2024-02-29T23:59:59.123Z');
      const other = new Date('2025-01-01T00:00:00.000Z');
      const tokens = [token, token, other, token, null, token];
      const result = await driver.execute(
        statement('test.date-array', 'SELECT unnest($1::timestamptz[]) AS at', [tokens]),
      );
      expect(result.rows.map((row) => row['at'])).toEqual(tokens);
    });

    driverPoolSuite(context);
  });
}

const UNSHOWN_PASSWORD = 'unshown-password-31';

/** A URL of this stand's kind that cannot be opened, and the place its error must name. */
async function unreachableUrl(kind: DatabaseKind, db: TestDatabase): Promise<{ url: string; host: string }> {
  if (kind === 'sqlite') {
    const file = join(tmpdir(), 'tq-missing-directory', 'queue.db');
    return { url: `sqlite:${file}`, host: file };
  }
  const url = new URL(db.url ?? '');
  url.hostname = '127.0.0.1';
  url.port = String(await findClosedPort());
  url.password = UNSHOWN_PASSWORD;
  return { url: url.toString(), host: `127.0.0.1:${url.port}` };
}

/** A port nothing listens on: one the system just gave out and took back. */
async function findClosedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no TCP port was assigned');
  return address.port;
}
