// A dialect of the service's own: PostgreSQL 10, older than tablequeue's floor (11, the first with
// hashtextextended). It extends the built-in PostgreSQL dialect and replaces one statement, the
// FIFO group guard, which hashes the group with the 32-bit hashtext instead (two groups whose
// keys collide only take turns); it refuses the advisory lock form, whose keys need the 64-bit
// hash, and takes PostgreSQL 10 in its version check. The dialect kit checks it as its test
// would, then a FIFO queue runs on it: while a delivery holds its group, the lock the guard took
// is the 32-bit key.
import pg from 'pg';
import { Broker, defineDialect, defineTable, DIALECT_RESULT_COLUMNS, type Statement, type TableSpec } from 'tablequeue';
import { checkDialectStatements } from 'tablequeue/testing';

/** The group guard on PostgreSQL 10: a transaction's advisory lock on the 32-bit hash of the table and group. */
function groupGuard(spec: TableSpec): Statement | undefined {
  if (spec.group?.fifo !== true) return undefined;
  const prefix = `${spec.qualifiedName}:`.replaceAll("'", "''");
  return {
    name: 'fifo.guard',
    sql: `SELECT pg_try_advisory_xact_lock(hashtext('${prefix}' || $1::text))::int AS "${DIALECT_RESULT_COLUMNS.groupGuard}"`,
    params: ['group'],
  };
}

export const postgres10 = defineDialect({
  basedOn: 'postgres',
  label: 'postgres10',
  // The Dialect interface version these overrides were written against.
  interfaceVersion: 1,
  overrides: (postgres) => ({
    fifo: { guard: groupGuard },
    lease: {
      // A lease claim of a FIFO table carries the same guard, run first in its transaction.
      claim: (spec, columns, options) => {
        const claim = postgres.lease.claim(spec, columns, options);
        if (claim.kind !== 'single' || claim.guarded === undefined) return claim;
        return { ...claim, guarded: { ...claim.guarded, guard: groupGuard(spec)! } };
      },
    },
    validateTable: (spec) => {
      // Refused at start() as an UnsupportedError naming the table and the dialect.
      if (spec.form === 'advisory') throw new Error('the advisory lock form needs 64-bit lock keys; add lockedUntil for the lease form');
      postgres.validateTable(spec);
    },
    checkServerVersion: (version) => {
      // server_version_num: 100023 for 10.23. A throw is a ServerVersionError at start().
      if (!(/^\d{6}$/.test(version) && Number(version) >= 100000)) throw new Error('PostgreSQL 10 or later is needed');
    },
  }),
});

// What the dialect's own test runs: every statement renders as the library needs it.
const checked = checkDialectStatements(postgres10);
console.log(`dialect kit: ${checked.checked} renderings checked, its own: ${checked.overridden.join(', ')}`);

const pool = new pg.Pool({ connectionString: process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
// A table of its own for every run, dropped at the end; the row lock form holds the claim's
// transaction, and with it the group's lock, while the handler runs.
const shipments = defineTable({ table: `shipments_${process.pid}`, id: 'id', group: { column: 'customer', fifo: true }, payload: 'payload' });
for (const statement of shipments.createTableSql('postgres')) await pool.query(statement);

try {
  const broker = new Broker({ database: pool, dialect: postgres10 });
  const customer = shipments.queue<{ step: number }>('customer-7');
  const handled: number[] = [];
  let allHandled = (): void => undefined;
  const done = new Promise<void>((resolve) => (allHandled = resolve));

  broker.subscribe(
    customer,
    async (message) => {
      // The advisory lock of this group under the 32-bit key, seen from another session.
      const { rows } = await pool.query<{ held: string }>(
        `SELECT count(*) AS held FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1
           AND ((classid::bigint << 32) | objid::bigint) = hashtext($1)::bigint`,
        [`${shipments.spec.qualifiedName}:${customer.group}`],
      );
      if (rows[0]?.held !== '1') throw new Error('the group is not held under its 32-bit key');
      handled.push(message.payload.step);
      if (handled.length === 3) allHandled();
    },
    { workers: 3 },
  );
  await broker.start();
  await broker.publishMany(customer, [{ payload: { step: 1 } }, { payload: { step: 2 } }, { payload: { step: 3 } }]);
  await done;
  await broker.stop();

  console.log(`handled in order: ${handled.join(', ')}`);
  if (handled.join() !== '1,2,3') throw new Error('the FIFO group came out of order');
} finally {
  await pool.query(`DROP TABLE IF EXISTS ${shipments.spec.name}`);
  await pool.end();
}
