import { describe, expect, it } from 'vitest';
import {
  DeclarationError,
  defineTable,
  Outcome,
  SchemaError,
  UnsupportedError,
  type ServiceStatements,
  type TableDeclaration,
} from '../../src/index.js';
import { createDeferred } from '../../src/internal/deferred.js';
import { Collector, countRows, createBroker, createTable, formsOf, untilStats, waitForDatabase, type FormUnderTest } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import type { Stand } from '../stand.js';
import { advisoryDeclaration } from './advisory-tables.js';

/**
 * A table's statements of the service's own on every stand: a claim that joins a tenants table
 * and skips suspended tenants, with a fetch that reads the tenant's name; an ack that writes an
 * audit row in its settlement's transaction, rolled back with it when the settlement fails; what
 * start() refuses, and a misspelt statement failing it; and, where the database has session
 * locks, an advisory lock of the service's own, whose unlock answering false closes the session.
 */
export function serviceStatementsSuite(context: SuiteContext): void {
  const { stand } = context;
  describe("a table's statements of the service's own", () => {
    for (const form of formsOf(stand)) {
      it(`${form}: a claim joined to tenants skips a suspended tenant's rows, and a fetch reads the tenant's name`, async () => {
        await context.db.exec('CREATE TABLE tenants (id VARCHAR(64) PRIMARY KEY, name VARCHAR(64) NOT NULL, suspended INTEGER NOT NULL)');
        await context.db.exec("INSERT INTO tenants (id, name, suspended) VALUES ('acme', 'Acme Inc', 0), ('globex', 'Globex', 1)");
        const table = defineTable({ ...tenantJobs(form), statements: tenantStatements(stand, form) });
        await createTable(stand, context.db, table);
        const queue = table.queue<{ n: number }>('emails');
        const broker = createBroker(context.db, context.brokers);
        const seen = new Collector<{ n: number; tenant: unknown; attempt: number }>();
        broker.subscribe(queue, (message) => {
          seen.push({ n: message.payload.n, tenant: message.row['tenant_name'], attempt: message.attempt });
        });
        await broker.start();
        await broker.publish(queue, { n: 1 }, { partitionKey: 'acme' });
        await broker.publish(queue, { n: 2 }, { partitionKey: 'globex' });
        await broker.publish(queue, { n: 3 }, { partitionKey: 'acme' });
        await untilStats(broker, queue, (stats) => stats.acked === 2, 'the rows of the active tenant acked');
        // The suspended tenant's row was never taken: no attempt spent, no lease.
        expect(await countRows(context.db, 'tenant_jobs', "tenant = 'globex' AND attempt = 1")).toBe(1);
        await context.db.exec("UPDATE tenants SET suspended = 0 WHERE id = 'globex'");
        await untilStats(broker, queue, (stats) => stats.acked === 3, "the resumed tenant's row acked");
        expect([...seen.items].sort((a, b) => a.n - b.n)).toEqual([
          { n: 1, tenant: 'Acme Inc', attempt: 1 },
          { n: 2, tenant: 'Globex', attempt: 1 },
          { n: 3, tenant: 'Acme Inc', attempt: 1 },
        ]);
        expect(await countRows(context.db, 'tenant_jobs')).toBe(0);
      });

      it(`${form}: an ack writes an audit row in its settlement's transaction, and a failed ack rolls it back`, async () => {
        // Integer columns, as the ids are: better-sqlite3 binds a JavaScript number as a REAL,
        // which a text column of SQLite would keep as '1.0'.
        await context.db.exec('CREATE TABLE audit (job_id BIGINT NOT NULL)');
        // A job is billed once: a second billing fails the ack after its audit row was written.
        await context.db.exec('CREATE TABLE ledger (job_id BIGINT PRIMARY KEY)');
        const declaration: TableDeclaration = {
          table: 'audited_jobs',
          id: 'id',
          group: 'queue',
          attempt: 'attempt',
          payload: 'payload',
          ...(form === 'lease' ? { lockedUntil: 'locked_until' } : {}),
          statements: {
            ack: ['INSERT INTO audit (job_id) VALUES (:id)', 'INSERT INTO ledger (job_id) VALUES (:id)', 'DELETE FROM audited_jobs WHERE id = :id'],
            // Kept, moved aside: the built-in drop would delete it.
            drop: "UPDATE audited_jobs SET queue = 'dropped' WHERE id = :id",
          },
        };
        const table = defineTable(declaration);
        await createTable(stand, context.db, table);
        const queue = table.queue<string>('emails');
        const publisher = createBroker(context.db, context.brokers);
        await publisher.start();
        // First in claim order: a row lock claim takes a row whose ack failed again at once.
        const fresh = await publisher.publish(queue, 'fresh');
        const dropped = await publisher.publish(queue, 'dropped');
        const billed = await publisher.publish(queue, 'billed already');
        await publisher.stop();
        await context.db.query(`INSERT INTO ledger (job_id) VALUES (${stand.kind === 'postgres' ? '$1' : '?'})`, [billed]);
        const broker = createBroker(context.db, context.brokers);
        broker.on('error', () => undefined);
        broker.subscribe(queue, (message) => (message.payload === 'dropped' ? Outcome.drop() : Outcome.ack()));
        await broker.start();
        await untilStats(broker, queue, (stats) => stats.acked === 1 && stats.dropped === 1 && stats.settleErrors >= 1, 'an ack and a drop written, an ack failed');
        await broker.stop();
        expect(await idsIn(context, 'audit')).toEqual([fresh]);
        expect(await idsIn(context, 'ledger')).toEqual([fresh, billed]);
        expect(await countRows(context.db, 'audited_jobs')).toBe(2);
        expect(await countRows(context.db, 'audited_jobs', `id = ${Number(billed)} AND queue = 'emails'`)).toBe(1);
        expect(await countRows(context.db, 'audited_jobs', `id = ${Number(dropped)} AND queue = 'dropped'`)).toBe(1);
      });
    }

    it('refuses at start() what a form cannot keep its promises with, and a statement the server cannot prepare', async () => {
      const lease = (statements: ServiceStatements) => defineTable({ table: 'refused_jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', payload: 'payload', statements });
      await createTable(stand, context.db, lease({}));
      const failureOf = async (table: ReturnType<typeof lease>): Promise<unknown> => {
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(table.queue('emails'), () => undefined);
        return broker.start().then(
          () => undefined,
          (error: unknown) => error,
        );
      };

      const lockAlone = await failureOf(lease({ lock: 'SELECT 1 WHERE :key IS NOT NULL' }));
      expect(lockAlone).toBeInstanceOf(DeclarationError);
      expect((lockAlone as Error).message).toMatch(/^table "refused_jobs": statements\.lock comes without statements\.unlock/);

      const misspelt = await failureOf(lease({ ack: 'DELETE FROM refused_jobs WHERE idd = :id' }));
      expect(misspelt).toBeInstanceOf(SchemaError);
      expect(misspelt).toMatchObject({ table: 'refused_jobs', statement: 'statements.ack' });
      expect((misspelt as Error).message).toMatch(/fix its text in defineTable\(\{ statements \}\)/);

      const claimed = lease({ claim: 'SELECT id FROM refused_jobs WHERE queue = :group LIMIT :limit' });
      const claimAlone = await failureOf(claimed);
      if (stand.kind === 'postgres') {
        // PostgreSQL fetches the claimed ids itself, by an array.
        expect(claimAlone).toBeUndefined();
        const broker = context.brokers.at(-1)!;
        const queue = claimed.queue('emails');
        await broker.publish(queue, 'fetched by tablequeue');
        await untilStats(broker, queue, (stats) => stats.acked === 1, 'the row claimed by its id acked');
      } else {
        expect(claimAlone).toBeInstanceOf(UnsupportedError);
        expect((claimAlone as Error).message).toMatch(/statements\.claim returns ids, .* so declare statements\.fetch/);
      }

      const advisory = defineTable({
        ...advisoryDeclaration({ name: 'refused_advisory' }),
        statements: { claim: 'SELECT id FROM refused_advisory LIMIT :limit', fetch: 'SELECT * FROM refused_advisory WHERE id = :id' },
      });
      await createTable(stand, context.db, advisory);
      const advisoryClaim = await failureOf(advisory);
      expect(advisoryClaim).toBeInstanceOf(DeclarationError);
      expect((advisoryClaim as Error).message).toMatch(/statements\.claim cannot serve the advisory lock form/);
    });

    describe.runIf(stand.capabilities.supportsSessionLocks)('an advisory lock of its own', () => {
      it("holds each delivery's key under the service's lock, and a session whose unlock answers false is closed, its locks with it", async () => {
        const held = stand.kind === 'postgres' ? postgresServiceLock : mysqlServiceLock;
        const table = defineTable({
          ...advisoryDeclaration({ name: 'jobs', mark: true }),
          statements: { lock: held.lock, unlock: held.unlock },
        });
        await createTable(stand, context.db, table);
        const queue = table.queue<string>('emails');
        const release = createDeferred();
        const started = new Collector<string>();
        const broker = createBroker(context.db, context.brokers);
        broker.subscribe(queue, async (message) => {
          started.push(message.id);
          await release.promise;
        });
        await broker.start();
        const id = await broker.publish(queue, 'first');
        await started.waitFor(1);
        expect(await held.isHeld(context, id)).toBe(true);
        expect(await builtInLocksHeld(context)).toBe(0);
        release.resolve();
        await untilStats(broker, queue, (stats) => stats.acked === 1, 'the delivery acked');
        await waitForDatabase(async () => !(await held.isHeld(context, id)), 10_000, "the service's lock let go");

        // This unlock answers false and lets nothing go: only closing the session frees the key.
        const falseUnlock = defineTable({
          ...advisoryDeclaration({ name: 'jobs', mark: true }),
          statements: { lock: held.lock, unlock: held.unlockAnsweringFalse },
        });
        const second = createBroker(context.db, context.brokers);
        const falseQueue = falseUnlock.queue<string>('emails');
        second.subscribe(falseQueue, () => Outcome.ack());
        await broker.stop();
        await second.start();
        const secondId = await second.publish(falseQueue, 'second');
        await untilStats(second, falseQueue, (stats) => stats.acked === 1, 'the delivery acked');
        await waitForDatabase(async () => !(await held.isHeld(context, secondId)), 10_000, 'the closed session took its lock with it');
        expect(await countRows(context.db, 'jobs', 'processed_at IS NOT NULL')).toBe(2);
      });
    });
  });
}

/** A table whose partition key is the tenant, its rows' tenant column. */
function tenantJobs(form: FormUnderTest): TableDeclaration {
  return {
    table: 'tenant_jobs',
    id: 'id',
    group: 'queue',
    partitionKey: 'tenant',
    retryAfter: 'retry_after',
    attempt: 'attempt',
    payload: 'payload',
    ...(form === 'lease' ? { lockedUntil: 'locked_until' } : {}),
  };
}

/** The claim joins tenants and leaves out the suspended ones; the fetch reads each row with its tenant's name. */
function tenantStatements(stand: Stand, form: FormUnderTest): ServiceStatements {
  const free = form === 'lease' ? ' AND (j.locked_until IS NULL OR j.locked_until <= :now)' : '';
  const fetched = 'SELECT j.*, t.name AS tenant_name FROM tenant_jobs j JOIN tenants t ON t.id = j.tenant';
  return {
    claim: `SELECT j.id FROM tenant_jobs j JOIN tenants t ON t.id = j.tenant
             WHERE j.queue = :group AND j.retry_after <= :now AND t.suspended = 0${free}
             ORDER BY j.id LIMIT :limit`,
    fetch: stand.kind === 'postgres' ? `${fetched} WHERE j.id = ANY(:ids)` : `${fetched} WHERE j.id = :id`,
  };
}

async function idsIn(context: SuiteContext, table: string): Promise<string[]> {
  // The database orders them as the numbers they are.
  const rows = await context.db.query<{ job_id: unknown }>(`SELECT job_id FROM ${table} ORDER BY job_id`);
  return rows.map((row) => String(row.job_id));
}

interface ServiceLock {
  readonly lock: string;
  readonly unlock: string;
  readonly unlockAnsweringFalse: string;
  /** Whether some session holds the service's lock on message `id`'s key (template `job-{id}`). */
  isHeld(context: SuiteContext, id: string): Promise<boolean>;
}

/** PostgreSQL: the two-key advisory lock in the service's own namespace 42, not tablequeue's 64-bit keys. */
const postgresServiceLock: ServiceLock = {
  lock: 'SELECT pg_try_advisory_lock(42, hashtext(:key)) AS taken',
  unlock: 'SELECT pg_advisory_unlock(42, hashtext(:key)) AS released',
  unlockAnsweringFalse: 'SELECT false AND length(:key) > 0 AS released',
  isHeld: async (context, id) => {
    const rows = await context.db.query<{ n: unknown }>(
      `SELECT COUNT(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
         AND classid = 42 AND objsubid = 2 AND objid::bigint = (hashtext('job-' || $1) & 4294967295)`,
      [id],
    );
    return Number(rows[0]!.n) > 0;
  },
};

/** MariaDB and MySQL: GET_LOCK under the service's prefix, the key hashed to keep the name within 64 characters. */
const mysqlServiceLock: ServiceLock = {
  lock: "SELECT GET_LOCK(CONCAT('svc:', MD5(:key)), 0) AS taken",
  unlock: "SELECT RELEASE_LOCK(CONCAT('svc:', MD5(:key))) AS released",
  unlockAnsweringFalse: 'SELECT 0 * CHAR_LENGTH(:key) AS released',
  isHeld: async (context, id) => {
    const rows = await context.db.query<{ holder: unknown }>(
      "SELECT IS_USED_LOCK(CONCAT('svc:', MD5(CONCAT(LOWER(DATABASE()), '.job-', ?)))) AS holder",
      [id],
    );
    return rows[0]!.holder !== null;
  },
};

/** Locks tablequeue's own lock statements would hold: the 64-bit PostgreSQL keys, or GET_LOCK on the bare key. */
async function builtInLocksHeld(context: SuiteContext): Promise<number> {
  if (context.stand.kind === 'postgres') {
    const rows = await context.db.query<{ n: unknown }>(
      "SELECT COUNT(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    );
    return Number(rows[0]!.n);
  }
  const rows = await context.db.query<{ n: unknown }>('SELECT COUNT(IS_USED_LOCK(CONCAT(LOWER(DATABASE()), \'.job-\', id))) AS n FROM jobs');
  return Number(rows[0]!.n);
}
