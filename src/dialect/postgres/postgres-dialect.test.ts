import { describe, expect, it } from 'vitest';
import { DeclarationError, ServerVersionError, UnsupportedError } from '../../errors.js';
import { createTableSpec } from '../../table/table-spec.js';
import { DOUBLE_QUOTE_STYLE, renderStatement, sql, textLiteral } from '../quoting.js';
import {
  advisoryKeyTable,
  collapseWhitespace,
  everyRoleLeaseTable,
  everyRoleTable,
  fifoLeaseTable,
  fifoTable,
  minimalFifoLeaseTable,
  minimalLeaseTable,
  minimalTable,
  reservedWordTable,
  schemaQualifiedTable,
  statementText,
} from '../test-tables.fixture.js';
import { checkPostgresServerVersion, createPostgresDialect } from './postgres-dialect.js';

const postgres = createPostgresDialect();
const EVERY_ROLE_COLUMNS = '"job_id", "queue", "priority", "customer", "retry_after", "attempt", "processed_at", "meta", "payload"';
const EVERY_LEASE_COLUMNS =
  '"job_id", "queue", "priority", "customer", "retry_after", "attempt", "processed_at", "locked_until", "meta", "payload"';
/** The fixture's headers column `meta` as a dead letter writes it, the last error bound at `$n`. */
function metaWithLastError(placeholder: string): string {
  const stored = `COALESCE(NULLIF("meta"::text, ''), '{}')::jsonb`;
  return `CASE jsonb_typeof(${stored}) WHEN 'object' THEN ${stored} || jsonb_build_object('tablequeue-last-error', ${placeholder}::text) ELSE ${stored} END`;
}

describe('postgres capabilities', () => {
  it('claims side by side on sessions of its own, with row locks, session locks and LISTEN', () => {
    expect(postgres.capabilities).toMatchObject({
      supportsRowLock: true,
      hasSingleWriter: false,
      sharesSessionWithService: false,
      leaseClaimLocksRows: false,
      supportsSessionLocks: true,
      supportsListenNotify: true,
    });
  });
});

describe('postgres session', () => {
  it('begins at the server default level, or at the declared one', () => {
    expect(postgres.session.begin().map(statementText)).toEqual([{ name: 'session.begin', sql: 'BEGIN', params: [] }]);
    expect(postgres.session.begin({ isolation: 'repeatable read' }).map(statementText)).toEqual([
      { name: 'session.begin', sql: 'BEGIN ISOLATION LEVEL REPEATABLE READ', params: [] },
    ]);
    expect(postgres.session.begin({ isolation: 'serializable' })[0]?.sql).toBe('BEGIN ISOLATION LEVEL SERIALIZABLE');
    expect(postgres.session.begin({ isolation: 'read committed' })[0]?.sql).toBe('BEGIN ISOLATION LEVEL READ COMMITTED');
  });

  it('ignores the SQLite begin mode', () => {
    expect(postgres.session.begin({ sqliteBegin: 'immediate' })[0]?.sql).toBe('BEGIN');
  });

  it('refuses read uncommitted, which Postgres would run as read committed', () => {
    expect(() => postgres.session.begin({ isolation: 'read uncommitted' })).toThrow(UnsupportedError);
  });

  it('commits, rolls back and reads the version number', () => {
    expect(statementText(postgres.session.commit())).toEqual({ name: 'session.commit', sql: 'COMMIT', params: [] });
    expect(statementText(postgres.session.rollback())).toEqual({ name: 'session.rollback', sql: 'ROLLBACK', params: [] });
    expect(statementText(postgres.session.serverVersion())).toEqual({
      name: 'session.serverVersion',
      sql: "SELECT current_setting('server_version_num') AS version",
      params: [],
    });
  });
});

describe('postgres rowLock.claim', () => {
  it('claims a minimal table by id alone', () => {
    expect(statementText(postgres.rowLock.claim(minimalTable.spec, minimalTable.columns))).toEqual({
      name: 'rowLock.claim',
      sql: 'SELECT "id", "body" FROM "jobs" ORDER BY "id" LIMIT $1 FOR UPDATE SKIP LOCKED',
      params: ['limit'],
    });
  });

  it('adds a condition and an order column per role', () => {
    expect(statementText(postgres.rowLock.claim(everyRoleTable.spec, everyRoleTable.columns))).toEqual({
      name: 'rowLock.claim',
      sql: `SELECT ${EVERY_ROLE_COLUMNS} FROM "email_jobs" WHERE "queue" = $1 AND "retry_after" <= $2 AND "processed_at" IS NULL ORDER BY "priority", "retry_after", "job_id" LIMIT $3 FOR UPDATE SKIP LOCKED`,
      params: ['group', 'now', 'limit'],
    });
  });

  it('WP-11: claims only the head of a FIFO group, when due and not held, one row whatever the limit', () => {
    expect(statementText(postgres.rowLock.claim(fifoTable.spec, fifoTable.columns))).toEqual({
      name: 'rowLock.claim',
      sql: `SELECT ${EVERY_ROLE_COLUMNS} FROM "email_jobs" WHERE "job_id" = (SELECT "job_id" FROM "email_jobs" WHERE "queue" = $1 AND "processed_at" IS NULL ORDER BY "priority", "retry_after", "job_id" LIMIT 1) AND "queue" = $2 AND "retry_after" <= $3 AND "processed_at" IS NULL FOR UPDATE SKIP LOCKED`,
      params: ['group', 'group', 'now'],
    });
  });

  it('reads the database clock instead of a bound now on a database-clock table', () => {
    const databaseClock = createTableSpec({ table: 'jobs', id: 'id', retryAfter: 'due', clock: 'database' });
    expect(statementText(postgres.rowLock.claim(databaseClock, ['id', 'due']))).toEqual({
      name: 'rowLock.claim',
      sql: 'SELECT "id", "due" FROM "jobs" WHERE "due" <= statement_timestamp() ORDER BY "due", "id" LIMIT $1 FOR UPDATE SKIP LOCKED',
      params: ['limit'],
    });
  });

  it('needs the columns found in the table', () => {
    expect(() => postgres.rowLock.claim(minimalTable.spec, [])).toThrow(TypeError);
  });
});

describe('postgres rowLock.retry', () => {
  it('counts the attempt, or has nothing to do without the column', () => {
    expect(statementText(postgres.rowLock.retry(everyRoleTable.spec)!)).toEqual({
      name: 'rowLock.retry',
      sql: 'UPDATE "email_jobs" SET "attempt" = "attempt" + 1 WHERE "job_id" = $1',
      params: ['id'],
    });
    expect(postgres.rowLock.retry(minimalTable.spec)).toBeUndefined();
  });
});

describe('postgres rowLock.finishMany', () => {
  it('deletes the rows of a batch in one statement, the id repeated once per row', () => {
    expect(statementText(postgres.rowLock.finishMany!(minimalTable.spec, 4))).toEqual({
      name: 'rowLock.finishMany',
      sql: 'DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3, $4)',
      params: ['id', 'id', 'id', 'id'],
    });
  });

  it('marks them finished on a table with processed_at, and refuses a row count below one', () => {
    expect(statementText(postgres.rowLock.finishMany!(everyRoleTable.spec, 2))).toEqual({
      name: 'rowLock.finishMany',
      sql: 'UPDATE "email_jobs" SET "processed_at" = $1 WHERE "job_id" IN ($2, $3)',
      params: ['now', 'id', 'id'],
    });
    expect(() => postgres.rowLock.finishMany!(minimalTable.spec, 0)).toThrow(/at least 1/);
  });
});

describe('postgres rowLock.retryAfter', () => {
  it('delays the row and counts the attempt', () => {
    expect(statementText(postgres.rowLock.retryAfter(everyRoleTable.spec)!)).toEqual({
      name: 'rowLock.retryAfter',
      sql: 'UPDATE "email_jobs" SET "retry_after" = $1, "attempt" = "attempt" + 1 WHERE "job_id" = $2',
      params: ['retryAfterAt', 'id'],
    });
  });

  it('only delays without an attempt column, and is undefined without retryAfter', () => {
    const delayOnly = createTableSpec({ table: 'jobs', id: 'id', retryAfter: 'run_at' });
    expect(statementText(postgres.rowLock.retryAfter(delayOnly)!)).toEqual({
      name: 'rowLock.retryAfter',
      sql: 'UPDATE "jobs" SET "run_at" = $1 WHERE "id" = $2',
      params: ['retryAfterAt', 'id'],
    });
    expect(postgres.rowLock.retryAfter(minimalTable.spec)).toBeUndefined();
  });
});

describe('postgres lease.claim', () => {
  it('locks, stamps and returns the rows as they were, in one statement', () => {
    const claim = postgres.lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns);
    expect(claim.kind).toBe('single');
    if (claim.kind !== 'single') return;
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql:
        `WITH tablequeue_claimed AS (SELECT ${EVERY_LEASE_COLUMNS} FROM "email_jobs" WHERE "queue" = $1 AND "retry_after" <= $2 AND "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $3) ORDER BY "priority", "retry_after", "job_id" LIMIT $4 FOR UPDATE SKIP LOCKED), ` +
        `tablequeue_stamp AS (UPDATE "email_jobs" SET "locked_until" = $5, "attempt" = "attempt" + 1 WHERE "job_id" = ANY(ARRAY(SELECT tablequeue_claimed."job_id" FROM tablequeue_claimed))) ` +
        `SELECT ${EVERY_LEASE_COLUMNS} FROM tablequeue_claimed ORDER BY "priority", "retry_after", "job_id"`,
      params: ['group', 'now', 'leaseNow', 'limit', 'lockedUntil'],
    });
  });

  it('stamps only the lease on a table without an attempt column', () => {
    const claim = postgres.lease.claim(minimalLeaseTable.spec, minimalLeaseTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql:
        'WITH tablequeue_claimed AS (SELECT "id", "body", "locked_until" FROM "jobs" WHERE ("locked_until" IS NULL OR "locked_until" <= $1) ORDER BY "id" LIMIT $2 FOR UPDATE SKIP LOCKED), ' +
        'tablequeue_stamp AS (UPDATE "jobs" SET "locked_until" = $3 WHERE "id" = ANY(ARRAY(SELECT tablequeue_claimed."id" FROM tablequeue_claimed))) ' +
        'SELECT "id", "body", "locked_until" FROM tablequeue_claimed ORDER BY "id"',
      params: ['leaseNow', 'limit', 'lockedUntil'],
    });
  });

  it('quotes reserved words in a schema-qualified table', () => {
    const claim = postgres.lease.claim(reservedWordTable.spec, reservedWordTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql:
        'WITH tablequeue_claimed AS (SELECT "select", "group", "from", "limit", "where", "table" FROM "user"."order" WHERE "group" = $1 AND "from" <= $2 AND ("where" IS NULL OR "where" <= $3) ORDER BY "from", "select" LIMIT $4 FOR UPDATE SKIP LOCKED), ' +
        'tablequeue_stamp AS (UPDATE "user"."order" SET "where" = $5, "limit" = "limit" + 1 WHERE "select" = ANY(ARRAY(SELECT tablequeue_claimed."select" FROM tablequeue_claimed))) ' +
        'SELECT "select", "group", "from", "limit", "where", "table" FROM tablequeue_claimed ORDER BY "from", "select"',
      params: ['group', 'now', 'leaseNow', 'limit', 'lockedUntil'],
    });
  });

  it('needs a lockedUntil column', () => {
    expect(() => postgres.lease.claim(everyRoleTable.spec, everyRoleTable.columns)).toThrow(DeclarationError);
  });

  it('runs unguarded, outside a transaction, on a table without FIFO groups', () => {
    const claim = postgres.lease.claim(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(claim.guarded).toBeUndefined();
  });
});

describe('postgres FIFO lease claim', () => {
  it('WP-11: takes the head only while no row of its group is in work, behind the guard in a read committed transaction', () => {
    const claim = postgres.lease.claim(fifoLeaseTable.spec, fifoLeaseTable.columns);
    if (claim.kind !== 'single' || claim.guarded === undefined) throw new Error('expected one guarded statement');
    expect(claim.guarded.begin.map(statementText)).toEqual([
      { name: 'session.begin', sql: 'BEGIN ISOLATION LEVEL READ COMMITTED', params: [] },
    ]);
    expect(statementText(claim.guarded.guard)).toEqual({
      name: 'fifo.guard',
      sql: `SELECT pg_try_advisory_xact_lock(hashtextextended('email_jobs:' || $1::text, 0))::int AS "owned"`,
      params: ['group'],
    });
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql:
        `WITH tablequeue_claimed AS (SELECT ${EVERY_LEASE_COLUMNS} FROM "email_jobs" WHERE "job_id" = (SELECT "job_id" FROM "email_jobs" WHERE "queue" = $1 AND "processed_at" IS NULL ORDER BY "priority", "retry_after", "job_id" LIMIT 1) AND "queue" = $2 AND "retry_after" <= $3 AND "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $4) AND (SELECT MAX(tablequeue_work."locked_until") FROM "email_jobs" AS tablequeue_work WHERE tablequeue_work."queue" = $5 AND tablequeue_work."locked_until" > $6) IS NULL FOR UPDATE SKIP LOCKED), ` +
        `tablequeue_stamp AS (UPDATE "email_jobs" SET "locked_until" = $7, "attempt" = "attempt" + 1 WHERE "job_id" = ANY(ARRAY(SELECT tablequeue_claimed."job_id" FROM tablequeue_claimed))) ` +
        `SELECT ${EVERY_LEASE_COLUMNS} FROM tablequeue_claimed ORDER BY "priority", "retry_after", "job_id"`,
      params: ['group', 'group', 'now', 'leaseNow', 'group', 'leaseNow', 'lockedUntil'],
    });
  });

  it('WP-11: counts every row of the group as unfinished on a table that deletes finished rows', () => {
    const claim = postgres.lease.claim(minimalFifoLeaseTable.spec, minimalFifoLeaseTable.columns);
    if (claim.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(claim.statement)).toEqual({
      name: 'lease.claim',
      sql:
        'WITH tablequeue_claimed AS (SELECT "id", "queue", "locked_until" FROM "app"."jobs" WHERE "id" = (SELECT "id" FROM "app"."jobs" WHERE "queue" = $1 ORDER BY "id" LIMIT 1) AND "queue" = $2 AND ("locked_until" IS NULL OR "locked_until" <= $3) AND (SELECT MAX(tablequeue_work."locked_until") FROM "app"."jobs" AS tablequeue_work WHERE tablequeue_work."queue" = $4 AND tablequeue_work."locked_until" > $5) IS NULL FOR UPDATE SKIP LOCKED), ' +
        'tablequeue_stamp AS (UPDATE "app"."jobs" SET "locked_until" = $6 WHERE "id" = ANY(ARRAY(SELECT tablequeue_claimed."id" FROM tablequeue_claimed))) ' +
        'SELECT "id", "queue", "locked_until" FROM tablequeue_claimed ORDER BY "id"',
      params: ['group', 'group', 'leaseNow', 'group', 'leaseNow', 'lockedUntil'],
    });
  });
});

describe('postgres fifo.guard', () => {
  it('WP-11: keys a transaction-scoped advisory lock by the unquoted qualified table name and the group', () => {
    expect(statementText(postgres.fifo.guard(minimalFifoLeaseTable.spec)!)).toEqual({
      name: 'fifo.guard',
      sql: `SELECT pg_try_advisory_xact_lock(hashtextextended('app.jobs:' || $1::text, 0))::int AS "owned"`,
      params: ['group'],
    });
    expect(postgres.fifo.guard(fifoTable.spec)?.sql).toBe(
      `SELECT pg_try_advisory_xact_lock(hashtextextended('email_jobs:' || $1::text, 0))::int AS "owned"`,
    );
  });

  it('is undefined on a table without FIFO groups', () => {
    expect(postgres.fifo.guard(everyRoleTable.spec)).toBeUndefined();
    expect(postgres.fifo.guard(minimalLeaseTable.spec)).toBeUndefined();
  });
});

describe('postgres lease settlements', () => {
  const spec = everyRoleLeaseTable.spec;

  it('release clears the lease while we still hold it', () => {
    expect(statementText(postgres.lease.release(spec))).toEqual({
      name: 'lease.release',
      sql: 'UPDATE "email_jobs" SET "locked_until" = NULL WHERE "job_id" = $1 AND "locked_until" = $2',
      params: ['id', 'held'],
    });
  });

  it('retryAfter delays and clears the lease without counting again', () => {
    expect(statementText(postgres.lease.retryAfter(spec)!)).toEqual({
      name: 'lease.retryAfter',
      sql: 'UPDATE "email_jobs" SET "retry_after" = $1, "locked_until" = NULL WHERE "job_id" = $2 AND "locked_until" = $3',
      params: ['retryAfterAt', 'id', 'held'],
    });
    expect(postgres.lease.retryAfter(minimalLeaseTable.spec)).toBeUndefined();
  });

  it('extend moves the expiry from the held token to a new one', () => {
    expect(statementText(postgres.lease.extend(spec))).toEqual({
      name: 'lease.extend',
      sql: 'UPDATE "email_jobs" SET "locked_until" = $1 WHERE "job_id" = $2 AND "locked_until" = $3',
      params: ['lockedUntil', 'id', 'held'],
    });
  });

  it('refuses a table without a lockedUntil column', () => {
    expect(() => postgres.lease.release(minimalTable.spec)).toThrow(DeclarationError);
    expect(() => postgres.lease.extend(minimalTable.spec)).toThrow(DeclarationError);
  });
});

describe('postgres settle.finish', () => {
  it('deletes, fenced or not', () => {
    expect(statementText(postgres.settle.finish(minimalTable.spec, { fenced: false }))).toEqual({
      name: 'settle.finish',
      sql: 'DELETE FROM "jobs" WHERE "id" = $1',
      params: ['id'],
    });
    expect(statementText(postgres.settle.finish(minimalLeaseTable.spec, { fenced: true }))).toEqual({
      name: 'settle.finish',
      sql: 'DELETE FROM "jobs" WHERE "id" = $1 AND "locked_until" = $2',
      params: ['id', 'held'],
    });
  });

  it('marks processed_at, clearing the lease when fenced', () => {
    expect(statementText(postgres.settle.finish(everyRoleTable.spec, { fenced: false }))).toEqual({
      name: 'settle.finish',
      sql: 'UPDATE "email_jobs" SET "processed_at" = $1 WHERE "job_id" = $2',
      params: ['now', 'id'],
    });
    expect(statementText(postgres.settle.finish(everyRoleLeaseTable.spec, { fenced: true }))).toEqual({
      name: 'settle.finish',
      sql: 'UPDATE "email_jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "job_id" = $2 AND "locked_until" = $3',
      params: ['now', 'id', 'held'],
    });
  });

  it('cannot fence a table without a lease column', () => {
    expect(() => postgres.settle.finish(minimalTable.spec, { fenced: true })).toThrow(DeclarationError);
  });
});

describe('postgres settle.deadLetter', () => {
  const toGroup = { kind: 'group', group: 'dead' } as const;
  const toTable = { kind: 'table', schema: undefined, name: 'email_jobs_dead' } as const;

  it('moves the row into a group, its headers gaining the last error', () => {
    expect(postgres.settle.deadLetter(everyRoleTable.spec, everyRoleTable.columns, toGroup, { fenced: false }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: `UPDATE "email_jobs" SET "queue" = $1, "meta" = ${metaWithLastError('$2')} WHERE "job_id" = $3`,
        params: ['destination', 'lastError', 'id'],
      },
    ]);
    expect(postgres.settle.deadLetter(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, toGroup, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: `UPDATE "email_jobs" SET "queue" = $1, "locked_until" = NULL, "meta" = ${metaWithLastError('$2')} WHERE "job_id" = $3 AND "locked_until" = $4`,
        params: ['destination', 'lastError', 'id', 'held'],
      },
    ]);
  });

  it('moves the row of a table without headers into a group as it is', () => {
    expect(postgres.settle.deadLetter(schemaQualifiedTable.spec, schemaQualifiedTable.columns, toGroup, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: 'UPDATE "app"."jobs" SET "queue" = $1, "locked_until" = NULL WHERE "id" = $2 AND "locked_until" = $3',
        params: ['destination', 'id', 'held'],
      },
    ]);
  });

  it('refuses a group on a table without a group column', () => {
    expect(() => postgres.settle.deadLetter(minimalTable.spec, minimalTable.columns, toGroup, { fenced: false })).toThrow(DeclarationError);
  });

  it('moves the row into a table in one statement, the copy\'s headers gaining the last error', () => {
    const copied = EVERY_ROLE_COLUMNS.replace('"meta"', metaWithLastError('$2'));
    expect(postgres.settle.deadLetter(everyRoleTable.spec, everyRoleTable.columns, toTable, { fenced: false }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: `WITH tablequeue_moved AS (DELETE FROM "email_jobs" WHERE "job_id" = $1 RETURNING ${EVERY_ROLE_COLUMNS}) INSERT INTO "email_jobs_dead" (${EVERY_ROLE_COLUMNS}) SELECT ${copied} FROM tablequeue_moved`,
        params: ['id', 'lastError'],
      },
    ]);
  });

  it('writes NULL for the lease and the last error into the headers when a fenced row moves into a table', () => {
    const copied = EVERY_LEASE_COLUMNS.replace('"locked_until"', 'NULL').replace('"meta"', metaWithLastError('$3'));
    expect(postgres.settle.deadLetter(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns, toTable, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: `WITH tablequeue_moved AS (DELETE FROM "email_jobs" WHERE "job_id" = $1 AND "locked_until" = $2 RETURNING ${EVERY_LEASE_COLUMNS}) INSERT INTO "email_jobs_dead" (${EVERY_LEASE_COLUMNS}) SELECT ${copied} FROM tablequeue_moved`,
        params: ['id', 'held', 'lastError'],
      },
    ]);
  });

  it('writes NULL for the lease when a fenced row moves into a schema-qualified table', () => {
    const target = { kind: 'table', schema: 'archive', name: 'jobs' } as const;
    expect(postgres.settle.deadLetter(schemaQualifiedTable.spec, schemaQualifiedTable.columns, target, { fenced: true }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter',
        sql: 'WITH tablequeue_moved AS (DELETE FROM "app"."jobs" WHERE "id" = $1 AND "locked_until" = $2 RETURNING "id", "queue", "locked_until", "payload") INSERT INTO "archive"."jobs" ("id", "queue", "locked_until", "payload") SELECT "id", "queue", NULL, "payload" FROM tablequeue_moved',
        params: ['id', 'held'],
      },
    ]);
  });

  it('refuses a destination that is not a valid Postgres identifier', () => {
    const columns = minimalTable.columns;
    expect(() => postgres.settle.deadLetter(minimalTable.spec, columns, { kind: 'table', schema: undefined, name: 'a;b' }, { fenced: false })).toThrow(DeclarationError);
    const longName = { kind: 'table', schema: undefined, name: 'é'.repeat(32) } as const;
    expect(() => postgres.settle.deadLetter(minimalTable.spec, columns, longName, { fenced: false })).toThrow(/64 bytes/);
  });
});

describe('postgres insert.rows', () => {
  it('inserts rows of named columns and returns the ids', () => {
    expect(statementText(postgres.insert.rows(everyRoleTable.spec, ['queue', 'payload'], 2))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO "email_jobs" ("queue", "payload") VALUES ($1, $2), ($3, $4) RETURNING "job_id"',
      params: ['column:queue', 'column:payload', 'column:queue', 'column:payload'],
    });
  });

  it('writes one row of defaults with DEFAULT VALUES', () => {
    expect(statementText(postgres.insert.rows(minimalTable.spec, [], 1))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO "jobs" DEFAULT VALUES RETURNING "id"',
      params: [],
    });
    expect(() => postgres.insert.rows(minimalTable.spec, [], 2)).toThrow(TypeError);
  });

  it('refuses zero rows', () => {
    expect(() => postgres.insert.rows(everyRoleTable.spec, ['payload'], 0)).toThrow(TypeError);
  });
});

describe('postgres schema.probeColumns', () => {
  it('selects every column of no row', () => {
    expect(statementText(postgres.schema.probeColumns(schemaQualifiedTable.spec))).toEqual({
      name: 'schema.probeColumns',
      sql: 'SELECT * FROM "app"."jobs" WHERE 1 = 0',
      params: [],
    });
  });
});

describe('postgres schema.indexes', () => {
  it('reads the key columns of each valid index from the catalog, the table resolved as the statements resolve it', () => {
    expect(statementText(postgres.schema.indexes!.read(minimalFifoLeaseTable.spec))).toEqual({
      name: 'schema.indexes.read',
      sql: 'SELECT i.relname AS "index_name", a.attname AS "column_name" FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid CROSS JOIN LATERAL unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum WHERE x.indrelid = to_regclass(\'"app"."jobs"\') AND x.indisvalid AND k.ord <= x.indnkeyatts ORDER BY i.relname, k.ord',
      params: [],
    });
    expect(postgres.schema.indexes!.read(minimalLeaseTable.spec).sql).toContain(`to_regclass('"jobs"')`);
  });

  it('renders the in-work index createTableSql adds, and refuses a table without lockedUntil', () => {
    expect(postgres.schema.indexes!.renderInWorkIndex(everyRoleLeaseTable.spec)).toBe(
      'CREATE INDEX "email_jobs_in_work" ON "email_jobs" ("queue", "locked_until") WHERE "locked_until" IS NOT NULL',
    );
    expect(postgres.schema.indexes!.renderInWorkIndex(minimalLeaseTable.spec)).toBe('CREATE INDEX "jobs_in_work" ON "jobs" ("locked_until") WHERE "locked_until" IS NOT NULL');
    expect(() => postgres.schema.indexes!.renderInWorkIndex(everyRoleTable.spec)).toThrow(DeclarationError);
  });
});

describe('postgres schema.createTable', () => {
  it('indexes the leases of a FIFO lease table by group, partially: only rows that hold one', () => {
    expect(postgres.schema.createTable(minimalFifoLeaseTable.spec).slice(1)).toEqual([
      'CREATE INDEX "jobs_claim_order" ON "app"."jobs" ("queue", "id")',
      'CREATE INDEX "jobs_in_work" ON "app"."jobs" ("queue", "locked_until") WHERE "locked_until" IS NOT NULL',
    ]);
    expect(postgres.schema.createTable(fifoTable.spec).slice(1)).toEqual([
      'CREATE INDEX "email_jobs_claim_order" ON "email_jobs" ("queue", "priority", "retry_after", "job_id") WHERE "processed_at" IS NULL',
    ]);
  });

  it('indexes the leases of any lease table when asked (inWorkIndex), by group where it has one, and refuses nothing else', () => {
    expect(postgres.schema.createTable(everyRoleLeaseTable.spec, { inWorkIndex: true }).slice(1)).toEqual([
      'CREATE INDEX "email_jobs_claim_order" ON "email_jobs" ("queue", "priority", "retry_after", "job_id") WHERE "processed_at" IS NULL',
      'CREATE INDEX "email_jobs_in_work" ON "email_jobs" ("queue", "locked_until") WHERE "locked_until" IS NOT NULL',
    ]);
    expect(postgres.schema.createTable(minimalLeaseTable.spec, { inWorkIndex: true }).slice(1)).toEqual([
      'CREATE INDEX "jobs_in_work" ON "jobs" ("locked_until") WHERE "locked_until" IS NOT NULL',
    ]);
    expect(postgres.schema.createTable(minimalFifoLeaseTable.spec, { inWorkIndex: true })).toEqual(postgres.schema.createTable(minimalFifoLeaseTable.spec));
    expect(postgres.schema.createTable(everyRoleTable.spec, { inWorkIndex: true })).toEqual(postgres.schema.createTable(everyRoleTable.spec));
  });

  it('renders every role and a partial claim-order index', () => {
    expect(postgres.schema.createTable(everyRoleLeaseTable.spec).map(collapseWhitespace)).toEqual([
      'CREATE TABLE "email_jobs" ("job_id" BIGSERIAL PRIMARY KEY, "queue" TEXT NOT NULL, "priority" SMALLINT NOT NULL DEFAULT 0, "customer" TEXT NULL, "retry_after" TIMESTAMPTZ NOT NULL DEFAULT now(), "attempt" SMALLINT NOT NULL DEFAULT 1, "processed_at" TIMESTAMPTZ NULL, "locked_until" TIMESTAMPTZ NULL, "meta" JSONB NULL, "payload" BYTEA NOT NULL) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_limit = 2000, autovacuum_analyze_scale_factor = 0.02)',
      'CREATE INDEX "email_jobs_claim_order" ON "email_jobs" ("queue", "priority", "retry_after", "job_id") WHERE "processed_at" IS NULL',
    ]);
  });

  it('renders supplied ids in a schema', () => {
    expect(postgres.schema.createTable(schemaQualifiedTable.spec).map(collapseWhitespace)).toEqual([
      'CREATE TABLE "app"."jobs" ("id" TEXT PRIMARY KEY, "queue" TEXT NOT NULL, "locked_until" TIMESTAMPTZ NULL, "payload" BYTEA NOT NULL) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_limit = 2000, autovacuum_analyze_scale_factor = 0.02)',
      'CREATE INDEX "jobs_claim_order" ON "app"."jobs" ("queue", "id")',
    ]);
  });

  it('leaves out an index the primary key already is, and adds advisory key columns', () => {
    expect(postgres.schema.createTable(minimalTable.spec).map(collapseWhitespace)).toEqual([
      'CREATE TABLE "jobs" ("id" BIGSERIAL PRIMARY KEY) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_limit = 2000, autovacuum_analyze_scale_factor = 0.02)',
    ]);
    expect(postgres.schema.createTable(advisoryKeyTable.spec).map(collapseWhitespace)).toEqual([
      'CREATE TABLE "jobs" ("id" BIGSERIAL PRIMARY KEY, "payload" BYTEA NOT NULL, "tenant" TEXT NULL) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_limit = 2000, autovacuum_analyze_scale_factor = 0.02)',
    ]);
  });

  it('shortens a long index name to 63 bytes with a stable hash, cutting between characters', () => {
    const spec = createTableSpec({ table: 'é'.repeat(31), id: 'id', group: 'queue' });
    const [, index] = postgres.schema.createTable(spec);
    const name = /^CREATE INDEX "([^"]+)"/.exec(index ?? '')?.[1] ?? '';
    expect(name).toMatch(/^é+_[0-9a-f]{8}_claim_order$/);
    expect(new TextEncoder().encode(name).length).toBeLessThanOrEqual(63);
    expect(postgres.schema.createTable(spec)[1]).toBe(index);
  });

  it('refuses names Postgres would truncate', () => {
    expect(() => postgres.schema.createTable(createTableSpec({ table: 'é'.repeat(32), id: 'id' }))).toThrow(DeclarationError);
  });
});

describe('postgres validateTable', () => {
  it('accepts names of up to 63 bytes', () => {
    expect(() => postgres.validateTable(createTableSpec({ table: 'a'.repeat(63), id: 'é'.repeat(31) }))).not.toThrow();
  });

  it('counts bytes, not characters: 32 two-byte letters are 64 bytes', () => {
    expect(() => postgres.validateTable(createTableSpec({ table: 'é'.repeat(32), id: 'id' }))).toThrow(/64 bytes/);
    expect(() => postgres.validateTable(createTableSpec({ table: 'jobs', id: 'id', group: 'é'.repeat(32) }))).toThrow(DeclarationError);
    expect(() => postgres.validateTable(createTableSpec({ schema: 'a'.repeat(64), table: 'jobs', id: 'id' }))).toThrow(DeclarationError);
    const keyColumn = createTableSpec({ table: 'jobs', id: 'id', advisoryLock: `jobs-{${'k'.repeat(64)}}` });
    expect(() => postgres.validateTable(keyColumn)).toThrow(DeclarationError);
  });

  it('refuses read uncommitted and accepts the other levels', () => {
    expect(() => postgres.validateTable(createTableSpec({ table: 'jobs', id: 'id', isolation: 'read uncommitted' }))).toThrow(UnsupportedError);
    expect(() => postgres.validateTable(createTableSpec({ table: 'jobs', id: 'id', isolation: 'serializable' }))).not.toThrow();
  });
});

describe('postgres quoting', () => {
  it('doubles a double quote inside a name', () => {
    expect(DOUBLE_QUOTE_STYLE.quoteIdentifier('a"b')).toBe('"a""b"');
    expect(DOUBLE_QUOTE_STYLE.quoteIdentifier('order')).toBe('"order"');
  });

  it("doubles a single quote inside a text literal and refuses a backslash", () => {
    expect(renderStatement(DOUBLE_QUOTE_STYLE, 'literal', sql`SELECT ${textLiteral("it's")}`).sql).toBe("SELECT 'it''s'");
    expect(() => textLiteral('a\\b')).toThrow(TypeError);
  });
});

describe('checkPostgresServerVersion', () => {
  it('reads server_version_num', () => {
    expect(checkPostgresServerVersion('150020')).toEqual({ major: 15, minor: 20 });
    expect(checkPostgresServerVersion('110000')).toEqual({ major: 11, minor: 0 });
    expect(checkPostgresServerVersion(' 170002\n')).toEqual({ major: 17, minor: 2 });
  });

  it('refuses servers before 11, naming what it found', () => {
    expect(() => checkPostgresServerVersion('100023')).toThrow(/PostgreSQL 10\.23 is older than PostgreSQL 11/);
    expect(() => checkPostgresServerVersion('90624')).toThrow(/PostgreSQL 9\.6 /);
  });

  it('refuses text that is not a version number', () => {
    expect(() => checkPostgresServerVersion('15.2 (Debian 15.2-1)')).toThrow(ServerVersionError);
    expect(() => checkPostgresServerVersion('garbage')).toThrow(/"garbage"/);
  });
});
