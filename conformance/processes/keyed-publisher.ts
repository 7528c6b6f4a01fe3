/**
 * Publishes one dedupe key many times from a process of its own, for the race across processes.
 * Configured by one JSON argument; prints `ready` once its broker started, waits for a line `go`
 * on stdin so every process starts at once, then prints `done <JSON>` with what each publish said.
 * With `inTransaction`, each publish runs inside a transaction of the service's own connection.
 */
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { Broker, defineTable, type KeyedPublishResult, type TableDeclaration } from '../../src/index.js';

export interface KeyedPublisherConfig {
  database: string;
  kind: 'postgres' | 'mysql' | 'sqlite';
  table: TableDeclaration;
  queue: string;
  key: string;
  count: number;
  inFlight: number;
  inTransaction: boolean;
}

export interface KeyedPublisherReport {
  published: string[];
  duplicateOf: string[];
}

const config = JSON.parse(process.argv[2]!) as KeyedPublisherConfig;
const queue = defineTable(config.table).queue(config.queue);
const broker = new Broker({ database: config.database, pool: { max: config.inFlight + 1 } });
broker.on('error', (error) => process.stderr.write(`error: ${(error as Error).message}\n`));
await broker.start();

/** Runs `publish` inside a transaction of the service's own connection, committed after it. */
type InTransaction = (publish: (tx: unknown) => Promise<KeyedPublishResult>) => Promise<KeyedPublishResult>;

function serviceTransactions(): { run: InTransaction; end: () => Promise<void> } {
  switch (config.kind) {
    case 'postgres': {
      const pool = new pg.Pool({ connectionString: config.database, max: config.inFlight });
      return {
        async run(publish) {
          const client = await pool.connect();
          try {
            await client.query('BEGIN');
            const result = await publish(client);
            await client.query('COMMIT');
            return result;
          } finally {
            client.release();
          }
        },
        end: () => pool.end(),
      };
    }
    case 'mysql': {
      const pool = mysql.createPool({ uri: config.database, connectionLimit: config.inFlight });
      return {
        async run(publish) {
          const connection = await pool.getConnection();
          try {
            await connection.query('START TRANSACTION');
            const result = await publish(connection);
            await connection.query('COMMIT');
            return result;
          } finally {
            connection.release();
          }
        },
        end: () => pool.end(),
      };
    }
    case 'sqlite': {
      // One handle: its transactions run one after another; other processes wait on the file lock.
      const handle = new Database(config.database.slice('sqlite:'.length), { timeout: 10_000 });
      let line: Promise<unknown> = Promise.resolve();
      return {
        run(publish) {
          const turn = line.then(async () => {
            handle.exec('BEGIN IMMEDIATE');
            try {
              const result = await publish(handle);
              handle.exec('COMMIT');
              return result;
            } catch (error) {
              handle.exec('ROLLBACK');
              throw error;
            }
          });
          line = turn.catch(() => undefined);
          return turn;
        },
        end: async () => void handle.close(),
      };
    }
  }
}

const transactions = config.inTransaction ? serviceTransactions() : undefined;
process.stdout.write('ready\n');
await new Promise<void>((resolve) => {
  const lines = createInterface({ input: process.stdin });
  lines.on('line', (line) => {
    if (line === 'go') {
      lines.close();
      resolve();
    }
  });
});

const report: KeyedPublisherReport = { published: [], duplicateOf: [] };
let next = 0;
async function publishLoop(): Promise<void> {
  while (next < config.count) {
    const index = next++;
    const publish = (tx?: unknown) =>
      broker.publish(queue, { index, pid: process.pid }, tx === undefined ? { dedupeKey: config.key } : { dedupeKey: config.key, tx });
    const result = transactions === undefined ? await publish() : await transactions.run(publish);
    if (result.status === 'published') report.published.push(result.id!);
    else report.duplicateOf.push(String(result.id));
  }
}
await Promise.all(Array.from({ length: config.inFlight }, () => publishLoop()));
await transactions?.end();
await broker.stop();
process.stdout.write(`done ${JSON.stringify(report)}\n`);
