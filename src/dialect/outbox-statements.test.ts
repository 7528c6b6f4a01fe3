import { describe, expect, it } from 'vitest';
import { defineOutbox } from '../outbox/define-outbox.js';
import { createTableSpec } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import type { LeaseClaim } from './dialect.js';
import { createOutboxStatements, type OutboxStatements } from './outbox-statements.js';
import { statementText } from './test-tables.fixture.js';

const postgres = createDialect('postgres');
const mysql = createDialect('mysql');
const mariadb = createDialect('mariadb');
const sqlite = createDialect('sqlite');

/** Every role: headers, and processed records marked. */
const marked = defineOutbox({
  table: 'outbox',
  id: 'id',
  name: 'name',
  payload: 'payload',
  headers: 'headers',
  processedAt: 'processed_at',
  lockedUntil: 'locked_until',
});
const markedColumns = ['id', 'name', 'headers', 'payload'];

/** A schema, no headers, relayed records deleted; names that need quoting elsewhere. */
const deleting = defineOutbox({ schema: 'app', table: 'events', id: 'record_id', name: 'topic', payload: 'body', lockedUntil: 'leased_until' });
const deletingColumns = ['record_id', 'topic', 'body'];

function textOf(statements: OutboxStatements) {
  return {
    begin: statements.begin.map(statementText),
    names: statementText(statements.names),
    claim: claimText(statements.claim),
    finish: statementText(statements.finish),
    extend: statementText(statements.extend),
  };
}

function claimText(claim: LeaseClaim) {
  if (claim.kind === 'single') {
    return {
      kind: claim.kind,
      statement: statementText(claim.statement),
      guard: claim.guarded === undefined ? undefined : statementText(claim.guarded.guard),
      begin: claim.guarded?.begin.map(statementText),
    };
  }
  return {
    kind: claim.kind,
    begin: claim.begin.map(statementText),
    guard: claim.guard === undefined ? undefined : statementText(claim.guard),
    select: statementText(claim.select),
    stamp: statementText(claim.stamp),
    stampAll: claim.stampAll === undefined ? undefined : statementText(claim.stampAll(2)),
    firstRows: claim.firstRows === undefined ? undefined : statementText(claim.firstRows),
  };
}

describe('postgres outbox statements', () => {
  it('claims the first records of a name behind the FIFO guard, and settles the batch by name and token', () => {
    const begin = [{ name: 'session.begin', sql: 'BEGIN ISOLATION LEVEL READ COMMITTED', params: [] }];
    expect(textOf(createOutboxStatements(postgres, marked.spec, markedColumns))).toEqual({
      begin,
      names: {
        name: 'outbox.names',
        sql: 'SELECT "name" FROM "outbox" WHERE "processed_at" IS NULL GROUP BY "name" HAVING COUNT(CASE WHEN "locked_until" > $1 THEN 1 END) = 0 ORDER BY MIN("id") LIMIT $2',
        params: ['leaseNow', 'limit'],
      },
      claim: {
        kind: 'single',
        begin,
        guard: {
          name: 'fifo.guard',
          sql: `SELECT pg_try_advisory_xact_lock(hashtextextended('outbox:' || $1::text, 0))::int AS "owned"`,
          params: ['group'],
        },
        statement: {
          name: 'outbox.claim',
          sql:
            'WITH tablequeue_first AS (SELECT "id" FROM "outbox" WHERE "name" = $1 AND "processed_at" IS NULL ORDER BY "id" LIMIT $2), ' +
            'tablequeue_locked AS (SELECT "id", "name", "headers", "payload" FROM "outbox" WHERE "name" = $3 AND "processed_at" IS NULL ' +
            'AND ("locked_until" IS NULL OR "locked_until" <= $4) AND (SELECT MAX(tablequeue_work."locked_until") FROM "outbox" AS tablequeue_work ' +
            'WHERE tablequeue_work."name" = $5 AND tablequeue_work."locked_until" > $6) IS NULL ORDER BY "id" LIMIT $7 FOR UPDATE SKIP LOCKED), ' +
            'tablequeue_claimed AS (SELECT "id", "name", "headers", "payload" FROM tablequeue_locked WHERE NOT EXISTS (SELECT 1 FROM tablequeue_first ' +
            'WHERE tablequeue_first."id" < tablequeue_locked."id" AND NOT EXISTS (SELECT 1 FROM tablequeue_locked AS tablequeue_taken ' +
            'WHERE tablequeue_taken."id" = tablequeue_first."id"))), ' +
            'tablequeue_stamp AS (UPDATE "outbox" SET "locked_until" = $8 ' +
            'WHERE "id" = ANY(ARRAY(SELECT tablequeue_claimed."id" FROM tablequeue_claimed))) SELECT "id", "name", "headers", "payload" FROM tablequeue_claimed ORDER BY "id"',
          params: ['group', 'limit', 'group', 'leaseNow', 'group', 'leaseNow', 'limit', 'lockedUntil'],
        },
      },
      finish: {
        name: 'outbox.finish',
        sql: 'UPDATE "outbox" SET "processed_at" = $1, "locked_until" = NULL WHERE "name" = $2 AND "locked_until" = $3',
        params: ['now', 'group', 'held'],
      },
      extend: {
        name: 'outbox.extend',
        sql: 'UPDATE "outbox" SET "locked_until" = $1 WHERE "name" = $2 AND "locked_until" = $3',
        params: ['lockedUntil', 'group', 'held'],
      },
    });
  });

  it('deletes relayed records, and names the schema everywhere', () => {
    const text = textOf(createOutboxStatements(postgres, deleting.spec, deletingColumns));
    expect(text.names.sql).toBe(
      'SELECT "topic" FROM "app"."events" GROUP BY "topic" HAVING COUNT(CASE WHEN "leased_until" > $1 THEN 1 END) = 0 ORDER BY MIN("record_id") LIMIT $2',
    );
    expect(text.claim).toMatchObject({
      guard: { sql: `SELECT pg_try_advisory_xact_lock(hashtextextended('app.events:' || $1::text, 0))::int AS "owned"` },
      statement: {
        sql:
          'WITH tablequeue_first AS (SELECT "record_id" FROM "app"."events" WHERE "topic" = $1 ORDER BY "record_id" LIMIT $2), ' +
          'tablequeue_locked AS (SELECT "record_id", "topic", "body" FROM "app"."events" WHERE "topic" = $3 ' +
          'AND ("leased_until" IS NULL OR "leased_until" <= $4) AND (SELECT MAX(tablequeue_work."leased_until") FROM "app"."events" AS tablequeue_work ' +
          'WHERE tablequeue_work."topic" = $5 AND tablequeue_work."leased_until" > $6) IS NULL ORDER BY "record_id" LIMIT $7 FOR UPDATE SKIP LOCKED), ' +
          'tablequeue_claimed AS (SELECT "record_id", "topic", "body" FROM tablequeue_locked WHERE NOT EXISTS (SELECT 1 FROM tablequeue_first ' +
          'WHERE tablequeue_first."record_id" < tablequeue_locked."record_id" AND NOT EXISTS (SELECT 1 FROM tablequeue_locked AS tablequeue_taken ' +
          'WHERE tablequeue_taken."record_id" = tablequeue_first."record_id"))), ' +
          'tablequeue_stamp AS (UPDATE "app"."events" SET "leased_until" = $8 ' +
          'WHERE "record_id" = ANY(ARRAY(SELECT tablequeue_claimed."record_id" FROM tablequeue_claimed))) SELECT "record_id", "topic", "body" FROM tablequeue_claimed ORDER BY "record_id"',
      },
    });
    expect(text.finish).toEqual({
      name: 'outbox.finish',
      sql: 'DELETE FROM "app"."events" WHERE "topic" = $1 AND "leased_until" = $2',
      params: ['group', 'held'],
    });
  });
});

describe('mysql and mariadb outbox statements', () => {
  it('guard, select the first records with row locks, stamp each; the same text on both', () => {
    const begin = [
      { name: 'session.isolation', sql: 'SET TRANSACTION ISOLATION LEVEL READ COMMITTED', params: [] },
      { name: 'session.begin', sql: 'START TRANSACTION', params: [] },
    ];
    for (const dialect of [mysql, mariadb]) {
      expect(textOf(createOutboxStatements(dialect, marked.spec, markedColumns))).toEqual({
        begin,
        names: {
          name: 'outbox.names',
          sql: 'SELECT `name` FROM `outbox` WHERE `processed_at` IS NULL GROUP BY `name` HAVING COUNT(CASE WHEN `locked_until` > ? THEN 1 END) = 0 ORDER BY MIN(`id`) LIMIT ?',
          params: ['leaseNow', 'limit'],
        },
        claim: {
          kind: 'selectThenStamp',
          begin,
          guard: {
            name: 'fifo.guard',
            sql: "SELECT CAST((SELECT COUNT(*) FROM `tablequeue_fifo_guards` WHERE `table_name` = 'outbox' AND `queue_name` = ? FOR UPDATE SKIP LOCKED) AS SIGNED) AS `owned`, CAST((SELECT COUNT(*) FROM `tablequeue_fifo_guards` WHERE `table_name` = 'outbox' AND `queue_name` = ?) AS SIGNED) AS `tablequeue_guard_row`",
            params: ['group', 'group'],
          },
          select: {
            name: 'outbox.claim',
            sql:
              'SELECT `id`, `name`, `headers`, `payload` FROM `outbox` WHERE `name` = ? AND `processed_at` IS NULL ' +
              'AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (SELECT MAX(tablequeue_work.`locked_until`) FROM `outbox` AS tablequeue_work ' +
              'WHERE tablequeue_work.`name` = ? AND tablequeue_work.`locked_until` > ?) IS NULL ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED',
            params: ['group', 'leaseNow', 'group', 'leaseNow', 'limit'],
          },
          stamp: {
            name: 'outbox.stamp',
            sql: 'UPDATE `outbox` SET `locked_until` = ? WHERE `id` = ? AND (`locked_until` IS NULL OR `locked_until` <= ?)',
            params: ['lockedUntil', 'id', 'leaseNow'],
          },
          stampAll: {
            name: 'outbox.stampAll',
            sql: 'UPDATE `outbox` SET `locked_until` = ? WHERE `id` IN (?, ?) AND (`locked_until` IS NULL OR `locked_until` <= ?)',
            params: ['lockedUntil', 'id', 'id', 'leaseNow'],
          },
          firstRows: {
            name: 'outbox.first',
            sql: 'SELECT `id` FROM `outbox` WHERE `name` = ? AND `processed_at` IS NULL ORDER BY `id` LIMIT ?',
            params: ['group', 'limit'],
          },
        },
        finish: {
          name: 'outbox.finish',
          sql: 'UPDATE `outbox` SET `processed_at` = ?, `locked_until` = NULL WHERE `name` = ? AND `locked_until` = ?',
          params: ['now', 'group', 'held'],
        },
        extend: {
          name: 'outbox.extend',
          sql: 'UPDATE `outbox` SET `locked_until` = ? WHERE `name` = ? AND `locked_until` = ?',
          params: ['lockedUntil', 'group', 'held'],
        },
      });
    }
  });

  it('guards a name by its row in the guard table of the outbox\'s schema when relayed records are deleted', () => {
    for (const dialect of [mysql, mariadb]) {
      const text = textOf(createOutboxStatements(dialect, deleting.spec, deletingColumns));
      expect(text.claim).toMatchObject({
        guard: {
          sql: "SELECT CAST((SELECT COUNT(*) FROM `app`.`tablequeue_fifo_guards` WHERE `table_name` = 'app.events' AND `queue_name` = ? FOR UPDATE SKIP LOCKED) AS SIGNED) AS `owned`, CAST((SELECT COUNT(*) FROM `app`.`tablequeue_fifo_guards` WHERE `table_name` = 'app.events' AND `queue_name` = ?) AS SIGNED) AS `tablequeue_guard_row`",
        },
      });
      expect(text.finish.sql).toBe('DELETE FROM `app`.`events` WHERE `topic` = ? AND `leased_until` = ?');
    }
  });
});

describe('sqlite outbox statements', () => {
  it('claims in one statement under the single writer, with no guard', () => {
    expect(textOf(createOutboxStatements(sqlite, marked.spec, markedColumns))).toEqual({
      begin: [{ name: 'session.begin', sql: 'BEGIN IMMEDIATE', params: [] }],
      names: {
        name: 'outbox.names',
        sql: 'SELECT `name` FROM `outbox` WHERE `processed_at` IS NULL GROUP BY `name` HAVING COUNT(CASE WHEN `locked_until` > ? THEN 1 END) = 0 ORDER BY MIN(`id`) LIMIT ?',
        params: ['leaseNow', 'limit'],
      },
      claim: {
        kind: 'single',
        begin: undefined,
        guard: undefined,
        statement: {
          name: 'outbox.claim',
          sql:
            'UPDATE `outbox` SET `locked_until` = ? WHERE `id` IN (SELECT `id` FROM `outbox` WHERE `name` = ? AND `processed_at` IS NULL ' +
            'AND (`locked_until` IS NULL OR `locked_until` <= ?) AND (SELECT MAX(tablequeue_work.`locked_until`) FROM `outbox` AS tablequeue_work ' +
            'WHERE tablequeue_work.`name` = ? AND tablequeue_work.`locked_until` > ?) IS NULL ORDER BY `id` LIMIT ?) RETURNING `id`, `name`, `headers`, `payload`',
          params: ['lockedUntil', 'group', 'leaseNow', 'group', 'leaseNow', 'limit'],
        },
      },
      finish: {
        name: 'outbox.finish',
        sql: 'UPDATE `outbox` SET `processed_at` = ?, `locked_until` = NULL WHERE `name` = ? AND `locked_until` = ?',
        params: ['now', 'group', 'held'],
      },
      extend: {
        name: 'outbox.extend',
        sql: 'UPDATE `outbox` SET `locked_until` = ? WHERE `name` = ? AND `locked_until` = ?',
        params: ['lockedUntil', 'group', 'held'],
      },
    });
  });

  it('deletes relayed records', () => {
    const text = textOf(createOutboxStatements(sqlite, deleting.spec, deletingColumns));
    expect(text.finish.sql).toBe('DELETE FROM `app`.`events` WHERE `topic` = ? AND `leased_until` = ?');
    expect(text.claim).toMatchObject({
      statement: {
        sql:
          'UPDATE `app`.`events` SET `leased_until` = ? WHERE `record_id` IN (SELECT `record_id` FROM `app`.`events` WHERE `topic` = ? ' +
          'AND (`leased_until` IS NULL OR `leased_until` <= ?) AND (SELECT MAX(tablequeue_work.`leased_until`) FROM `app`.`events` AS tablequeue_work ' +
          'WHERE tablequeue_work.`topic` = ? AND tablequeue_work.`leased_until` > ?) IS NULL ORDER BY `record_id` LIMIT ?) RETURNING `record_id`, `topic`, `body`',
      },
    });
  });
});

describe('outbox statements refuse a table that is not an outbox', () => {
  it('needs a FIFO name, a lease column and generated ids', () => {
    const queue = createTableSpec({ table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', payload: 'payload' });
    expect(() => createOutboxStatements(postgres, queue, ['id'])).toThrow(/is not an outbox table/);
  });
});

describe('outbox createTableSql', () => {
  it('renders the table, the (name, id) index of unprocessed records and the (name, locked_until) index of records in work on every database', () => {
    expect(marked.createTableSql('postgres')).toEqual([
      'CREATE TABLE "outbox" (\n  "id" BIGSERIAL PRIMARY KEY,\n  "name" TEXT NOT NULL,\n  "processed_at" TIMESTAMPTZ NULL,\n  "locked_until" TIMESTAMPTZ NULL,\n  "headers" JSONB NULL,\n  "payload" BYTEA NOT NULL\n) WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_limit = 2000, autovacuum_analyze_scale_factor = 0.02)',
      'CREATE INDEX "outbox_claim_order" ON "outbox" ("name", "id") WHERE "processed_at" IS NULL',
      'CREATE INDEX "outbox_in_work" ON "outbox" ("name", "locked_until") WHERE "locked_until" IS NOT NULL',
    ]);
    for (const [dialect, collation] of [
      ['mysql', 'utf8mb4_0900_bin'],
      ['mariadb', 'utf8mb4_nopad_bin'],
    ] as const) {
      expect(marked.createTableSql(dialect)).toEqual([
        `CREATE TABLE \`outbox\` (\n  \`id\` BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,\n  \`name\` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL,\n  \`processed_at\` DATETIME(6) NULL,\n  \`locked_until\` DATETIME NULL,\n  \`headers\` JSON NULL,\n  \`payload\` LONGBLOB NOT NULL\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
        'CREATE INDEX `outbox_claim_order` ON `outbox` (`name`, `processed_at`, `id`)',
        'CREATE INDEX `outbox_in_work` ON `outbox` (`name`, `locked_until`)',
      ]);
    }
    expect(marked.createTableSql('sqlite')).toEqual([
      'CREATE TABLE `outbox` (\n  `id` INTEGER PRIMARY KEY AUTOINCREMENT,\n  `name` TEXT NOT NULL,\n  `processed_at` TEXT,\n  `locked_until` TEXT,\n  `headers` TEXT,\n  `payload` BLOB NOT NULL\n)',
      'CREATE INDEX `outbox_claim_order` ON `outbox` (`name`, `id`) WHERE `processed_at` IS NULL',
      'CREATE INDEX `outbox_in_work` ON `outbox` (`name`, `locked_until`) WHERE `locked_until` IS NOT NULL',
    ]);
  });
});
