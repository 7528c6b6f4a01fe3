import { expect } from 'vitest';
import type { DatabaseKind, Driver, QueryResult } from '../../src/driver/driver.js';
import type { BoundStatement } from '../../src/statement.js';
import type { Stand, TestDatabase } from '../stand.js';

/** The SQL a driver test needs, per database: drivers carry none of their own. */
export interface DriverTestSql {
  readonly createItems: string;
  readonly begin: string;
  /** The database's own clock, in the form the `due_at` column compares with. */
  readonly now: string;
  /** This session's id; undefined on SQLite, where the handle is the session. */
  readonly sessionId: string | undefined;
  /** Ends a session by id, run on the admin connection. */
  readonly killSession: string | undefined;
  /** Counts (`n`) the sessions with an id that still run, on the admin connection. */
  readonly countSessions: string | undefined;
  readonly syntaxError: { readonly sqlState: string; readonly errno?: number };
  readonly missingTable: { readonly sqlState: string; readonly errno?: number };
}

export const DRIVER_TEST_SQL: Record<DatabaseKind, DriverTestSql> = {
  postgres: {
    createItems: 'CREATE TABLE items (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL, due_at TIMESTAMPTZ, body BYTEA)',
    begin: 'BEGIN',
    now: 'now()',
    sessionId: 'SELECT pg_backend_pid() AS session',
    killSession: 'SELECT pg_terminate_backend($1)',
    countSessions: 'SELECT COUNT(*) AS n FROM pg_stat_activity WHERE pid = $1',
    syntaxError: { sqlState: '42601' },
    missingTable: { sqlState: '42P01' },
  },
  mysql: {
    createItems:
      'CREATE TABLE items (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(100) NOT NULL, due_at DATETIME(6), body LONGBLOB)',
    begin: 'START TRANSACTION',
    now: 'UTC_TIMESTAMP(6)',
    sessionId: 'SELECT CONNECTION_ID() AS session',
    killSession: 'KILL ?',
    countSessions: 'SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE ID = ?',
    syntaxError: { sqlState: '42000', errno: 1064 },
    missingTable: { sqlState: '42S02', errno: 1146 },
  },
  sqlite: {
    createItems: 'CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, due_at TEXT, body BLOB)',
    begin: 'BEGIN IMMEDIATE',
    now: "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')",
    sessionId: undefined,
    killSession: undefined,
    countSessions: undefined,
    syntaxError: { sqlState: 'SQLITE_ERROR' },
    missingTable: { sqlState: 'SQLITE_ERROR' },
  },
};

/** What each driver test gets: its stand, its own database, and a few shorthands. */
export interface DriverTestContext {
  readonly stand: Stand;
  readonly sql: DriverTestSql;
  db: TestDatabase;
  /** Opens a driver over the test database; `drop()` closes it after the test. */
  openDriver(options?: { poolSize?: number }): Promise<Driver>;
  /** `$n` on Postgres, `?` elsewhere. */
  placeholder(index: number): string;
}

export function statement(name: string, sql: string, values: readonly unknown[] = []): BoundStatement {
  return { name, sql, values };
}

export function firstRow(result: QueryResult): Record<string, unknown> {
  const [row] = result.rows;
  if (row === undefined) throw new Error('the statement returned no row');
  return row;
}

/** Writes instants through the driver and checks how they read back and compare. */
export async function expectUtcTimes(context: DriverTestContext, driver: Driver): Promise<void> {
  const { placeholder: p, stand, sql } = context;
  const dueAt = new Date('2024-02-29T23:59:59.123Z');
  const now = Date.now();
  const insert = `INSERT INTO items (name, due_at) VALUES (${p(1)}, ${p(2)})`;
  await driver.execute(statement('test.insert-at', insert, ['leap', dueAt]));
  await driver.execute(statement('test.insert-at', insert, ['past', new Date(now - 60_000)]));
  await driver.execute(statement('test.insert-at', insert, ['future', new Date(now + 60_000)]));

  const read = await driver.execute(statement('test.read-at', `SELECT due_at FROM items WHERE name = ${p(1)}`, ['leap']));
  // SQLite keeps fixed-width UTC text, which sorts as time does.
  expect(firstRow(read)['due_at']).toEqual(stand.kind === 'sqlite' ? '2024-02-29T23:59:59.123+00:00' : dueAt);

  const dueCount = async (at: Date) => {
    const result = await driver.execute(
      statement('test.count-due', `SELECT COUNT(*) AS due FROM items WHERE name = 'leap' AND due_at <= ${p(1)}`, [at]),
    );
    return Number(firstRow(result)['due']);
  };
  expect(await dueCount(dueAt)).toBe(1);
  expect(await dueCount(new Date(dueAt.getTime() - 1))).toBe(0);
  expect(await dueCount(new Date(dueAt.getTime() + 1))).toBe(1);

  const due = await driver.execute(
    statement('test.due-now', `SELECT name FROM items WHERE due_at <= ${sql.now} AND name <> 'leap'`),
  );
  expect(due.rows).toEqual([{ name: 'past' }]);
}
