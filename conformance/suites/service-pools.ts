import Database from 'better-sqlite3';
import mysql from 'mysql2';
import pg from 'pg';
import { DeliveryTransaction } from '../../src/delivery/delivery-transaction.js';
import type { Stand, TestDatabase } from '../stand.js';

/** A pool or handle the service created itself and hands to tablequeue. */
export interface ServicePool {
  /** How the test names it. */
  readonly label: string;
  /** What the service passes as `database`. */
  readonly database: object;
  /** A query through the service's own API: it fails once the pool or handle is closed. */
  ping(): Promise<void>;
  /** One of the service's connections inside an open transaction, ended by `finish`. */
  beginTransaction(): Promise<ServiceTransaction>;
  end(): Promise<void>;
}

export interface ServiceTransaction {
  /** What the service passes as `tx`. */
  readonly connection: unknown;
  finish(how: 'COMMIT' | 'ROLLBACK'): Promise<void>;
}

/**
 * The forms a service may pass for this stand's database. Server pools are set to a time zone far
 * from UTC, which must change nothing about how times are written and compared.
 */
export function openServicePools(stand: Stand, db: TestDatabase): ServicePool[] {
  switch (stand.kind) {
    case 'postgres':
      return [openPgPool(requireUrl(db), { pipeline: false }), openPgPool(requireUrl(db), { pipeline: true })];
    case 'mysql':
      return [openMysqlPool(requireUrl(db), 'callback'), openMysqlPool(requireUrl(db), 'promise')];
    case 'sqlite':
      return [openSqliteHandle(db)];
  }
}

/** `pipeline`: node-postgres 8.23's pipelining, on which `executeAll` writes statements together. */
function openPgPool(url: string, { pipeline }: { readonly pipeline: boolean }): ServicePool {
  const pool = new pg.Pool({ connectionString: url, max: 3, options: '-c TimeZone=Asia/Kathmandu', pipeline });
  // A test's teardown terminates the database's sessions, idle ones of this pool too: their error
  // reaches the pool, which throws it out of the process when nothing listens.
  pool.on('error', () => undefined);
  return {
    label: pipeline ? 'a pg.Pool made with pipeline: true' : 'a pg.Pool',
    database: pool,
    ping: async () => void (await pool.query('SELECT 1')),
    async beginTransaction() {
      const client = await pool.connect();
      await client.query('BEGIN');
      return {
        connection: client,
        async finish(how) {
          await client.query(how);
          client.release();
        },
      };
    },
    end: () => pool.end(),
  };
}

function openMysqlPool(url: string, api: 'callback' | 'promise'): ServicePool {
  const pool = mysql.createPool({ uri: url, connectionLimit: 3, timezone: '+05:45' });
  const promisePool = pool.promise();
  return {
    label: api === 'callback' ? 'a mysql2 pool' : 'a mysql2/promise pool',
    database: api === 'callback' ? pool : promisePool,
    ping: async () => void (await promisePool.query('SELECT 1')),
    async beginTransaction() {
      const connection = await promisePool.getConnection();
      await connection.query('START TRANSACTION');
      return {
        connection: api === 'callback' ? connection.connection : connection,
        async finish(how) {
          await connection.query(how);
          connection.release();
        },
      };
    },
    end: () => promisePool.end(),
  };
}

/** The in-memory stand's handle is already the service's; a file gets a handle of its own. */
function openSqliteHandle(db: TestDatabase): ServicePool {
  const isShared = db.url === undefined;
  const handle = isShared ? (db.brokerDatabase as Database.Database) : new Database(sqliteFileOf(db), { timeout: 0 });
  return {
    label: 'a better-sqlite3 Database',
    database: handle,
    ping: async () => void handle.prepare('SELECT 1').get(),
    async beginTransaction() {
      handle.exec('BEGIN IMMEDIATE');
      return { connection: handle, finish: async (how) => void handle.exec(how) };
    },
    end: async () => {
      if (!isShared) handle.close();
    },
  };
}

/** The file path of a sqlite-file stand's database. */
export function sqliteFileOf(db: TestDatabase): string {
  return requireUrl(db).slice('sqlite:'.length);
}

function requireUrl(db: TestDatabase): string {
  if (db.url === undefined) throw new Error('this test database has no URL');
  return db.url;
}

/**
 * The service's own connections: its pg pool, mysql2 pools, a better-sqlite3 handle on the file.
 * An in-memory database has one handle, which the broker uses too; a transaction the service
 * held open on it across an await would take in the broker's statements (and the driver rolls
 * back what a returned handle leaves open), so there the service's transaction is a connection
 * of a driver over that handle, which waits for the broker's statements and keeps them out. It
 * is lent as a transactional handler lends `context.tx`, which wakes the relay at its commit.
 */
export function openServiceWriters(stand: Stand, db: TestDatabase): ServicePool[] {
  if (db.url !== undefined) return openServicePools(stand, db);
  const opening = db.openDriver();
  return [
    {
      label: 'a tablequeue connection on the shared handle',
      database: db.brokerDatabase as object,
      ping: async () => void (await (await opening).execute({ name: 'test.ping', sql: 'SELECT 1', values: [] })),
      async beginTransaction() {
        const connection = await (await opening).acquire();
        await connection.execute({ name: 'test.begin', sql: 'BEGIN IMMEDIATE', values: [] });
        const lent = new DeliveryTransaction(connection, 'service transaction');
        return {
          connection: lent,
          async finish(how) {
            lent.endLoan();
            await connection.execute({ name: 'test.finish', sql: how, values: [] });
            connection.release();
            if (how === 'COMMIT') lent.committed();
            else lent.rolledBack();
          },
        };
      },
      end: async () => (await opening).close(),
    },
  ];
}
