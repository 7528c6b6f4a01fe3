import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../../errors.js';
import { createTableSpec } from '../../table/table-spec.js';
import {
  advisoryKeyTable,
  everyRoleAdvisoryTable,
  everyRoleTable,
  schemaAdvisoryTable,
  statementText,
} from '../test-tables.fixture.js';
import { createPostgresDialect } from './postgres-dialect.js';

const postgres = createPostgresDialect();
const EVERY_ROLE_COLUMNS_BEFORE_TAKE =
  '"job_id", "queue", "priority", "customer", "retry_after", "attempt" - 1 AS "attempt", "processed_at", "meta", "payload"';

describe('postgres advisory.candidates', () => {
  it('renders the key with concat, fences the claim order with OFFSET 0 and probes with a shared xact lock', () => {
    expect(statementText(postgres.advisory.candidates(advisoryKeyTable.spec))).toEqual({
      name: 'advisory.candidates',
      sql: `SELECT "id", "tablequeue_key" FROM (SELECT "id", concat('jobs-', "tenant", '-', "id") AS "tablequeue_key" FROM "jobs" ORDER BY "id" OFFSET 0) AS tablequeue_candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("tablequeue_key", 0)) LIMIT $1`,
      params: ['limit'],
    });
  });

  it('selects only claimable rows of the group, in claim order', () => {
    expect(statementText(postgres.advisory.candidates(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.candidates',
      sql: `SELECT "job_id", "tablequeue_key" FROM (SELECT "job_id", concat('mail-', "customer") AS "tablequeue_key" FROM "email_jobs" WHERE "queue" = $1 AND "retry_after" <= $2 AND "processed_at" IS NULL ORDER BY "priority", "retry_after", "job_id" OFFSET 0) AS tablequeue_candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("tablequeue_key", 0)) LIMIT $3`,
      params: ['group', 'now', 'limit'],
    });
  });

  it('doubles a quote in the template literal and qualifies the table', () => {
    expect(statementText(postgres.advisory.candidates(schemaAdvisoryTable.spec)).sql).toBe(
      `SELECT "id", "tablequeue_key" FROM (SELECT "id", concat('o''k:', "id") AS "tablequeue_key" FROM "App"."jobs" WHERE "done_at" IS NULL ORDER BY "id" OFFSET 0) AS tablequeue_candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("tablequeue_key", 0)) LIMIT $1`,
    );
  });

  it('refuses a table without a key template', () => {
    expect(() => postgres.advisory.candidates(everyRoleTable.spec)).toThrow(DeclarationError);
    expect(() => postgres.advisory.candidates(everyRoleTable.spec)).toThrow(/advisoryLock: "jobs-\{id\}"/);
  });

  it('reads the database clock on a clock: "database" table, delays included', () => {
    const databaseClock = createTableSpec({
      table: 'jobs',
      id: 'id',
      retryAfter: 'retry_after',
      advisoryLock: 'k-{id}',
      clock: 'database',
    });
    expect(statementText(postgres.advisory.candidates(databaseClock))).toEqual({
      name: 'advisory.candidates',
      sql: 'SELECT "id", "tablequeue_key" FROM (SELECT "id", concat(\'k-\', "id") AS "tablequeue_key" FROM "jobs" WHERE "retry_after" <= statement_timestamp() ORDER BY "retry_after", "id" OFFSET 0) AS tablequeue_candidates WHERE pg_try_advisory_xact_lock_shared(hashtextextended("tablequeue_key", 0)) LIMIT $1',
      params: ['limit'],
    });
    expect(statementText(postgres.advisory.retryAfter(databaseClock)!)).toEqual({
      name: 'advisory.retryAfter',
      sql: 'UPDATE "jobs" SET "retry_after" = statement_timestamp() + $1::bigint * interval \'1 microsecond\' WHERE "id" = $2',
      params: ['delayMicroseconds', 'id'],
    });
  });
});

describe('postgres advisory.lock and advisory.unlock', () => {
  it('lock and unlock a 64-bit hash of the key on the session without waiting, one integer each', () => {
    expect(statementText(postgres.advisory.lock())).toEqual({
      name: 'advisory.lock',
      sql: 'SELECT pg_try_advisory_lock(hashtextextended($1, 0))::int AS "confirmed"',
      params: ['key'],
    });
    expect(statementText(postgres.advisory.unlock())).toEqual({
      name: 'advisory.unlock',
      sql: 'SELECT pg_advisory_unlock(hashtextextended($1, 0))::int AS "confirmed"',
      params: ['key'],
    });
  });
});

describe('postgres advisory.take', () => {
  it('counts the attempt while the row is claimable and returns the attempt as it was', () => {
    const take = postgres.advisory.take(everyRoleAdvisoryTable.spec, everyRoleAdvisoryTable.columns);
    expect(take.kind).toBe('single');
    if (take.kind !== 'single') return;
    expect(statementText(take.statement)).toEqual({
      name: 'advisory.take',
      sql: `UPDATE "email_jobs" SET "attempt" = "attempt" + 1 WHERE "job_id" = $1 AND "queue" = $2 AND "retry_after" <= $3 AND "processed_at" IS NULL RETURNING ${EVERY_ROLE_COLUMNS_BEFORE_TAKE}`,
      params: ['id', 'group', 'now'],
    });
  });

  it('only reads the row under the same conditions without an attempt column', () => {
    const take = postgres.advisory.take(advisoryKeyTable.spec, advisoryKeyTable.columns);
    if (take.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(take.statement)).toEqual({
      name: 'advisory.take',
      sql: 'SELECT "id", "tenant", "payload" FROM "jobs" WHERE "id" = $1',
      params: ['id'],
    });
  });

  it('needs the columns found in the table', () => {
    expect(() => postgres.advisory.take(everyRoleAdvisoryTable.spec, [])).toThrow(TypeError);
    expect(() => postgres.advisory.take(advisoryKeyTable.spec, [])).toThrow(TypeError);
  });
});

describe('postgres advisory settlements', () => {
  it('retryAfter sets retry_after only: the take counted the attempt', () => {
    expect(statementText(postgres.advisory.retryAfter(everyRoleAdvisoryTable.spec)!)).toEqual({
      name: 'advisory.retryAfter',
      sql: 'UPDATE "email_jobs" SET "retry_after" = $1 WHERE "job_id" = $2',
      params: ['retryAfterAt', 'id'],
    });
    expect(postgres.advisory.retryAfter(advisoryKeyTable.spec)).toBeUndefined();
  });

  it('finishes and dead-letters as the row lock form: by id, unfenced', () => {
    expect(statementText(postgres.settle.finish(schemaAdvisoryTable.spec, { fenced: false }))).toEqual({
      name: 'settle.finish',
      sql: 'UPDATE "App"."jobs" SET "done_at" = $1 WHERE "id" = $2',
      params: ['now', 'id'],
    });
    const [move] = postgres.settle.deadLetter(schemaAdvisoryTable.spec, schemaAdvisoryTable.columns, { kind: 'table', schema: undefined, name: 'dead_jobs' }, { fenced: false });
    expect(statementText(move!)).toEqual({
      name: 'settle.deadLetter',
      sql: 'WITH tablequeue_moved AS (DELETE FROM "App"."jobs" WHERE "id" = $1 RETURNING "id", "attempt", "done_at") INSERT INTO "dead_jobs" ("id", "attempt", "done_at") SELECT "id", "attempt", "done_at" FROM tablequeue_moved',
      params: ['id'],
    });
  });
});

describe('postgres advisory.keyOf', () => {
  it('reads the key of an unfinished row of the queue by id, due or not: what cancel locks', () => {
    expect(statementText(postgres.advisory.keyOf(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.keyOf',
      sql: "SELECT concat('mail-', \"customer\") AS \"tablequeue_key\" FROM \"email_jobs\" WHERE \"job_id\" = $1 AND \"queue\" = $2 AND \"processed_at\" IS NULL",
      params: ['id', 'group'],
    });
  });
});

describe('postgres advisory.slotKeys', () => {
  it('numbers the slots with generate_series; the server hashes each key as it does a row key', () => {
    expect(statementText(postgres.advisory.slotKeys(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.slotKeys',
      sql: "SELECT concat('tablequeue-slot/email_jobs/', $1::text, '/', tablequeue_slot) AS \"tablequeue_key\" FROM generate_series(1, $2::integer) AS tablequeue_slot ORDER BY tablequeue_slot",
      params: ['group', 'slots'],
    });
  });
});
