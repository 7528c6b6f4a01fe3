import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { createTableSpec } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import { createDedupeWindowStatements, parseDedupeWindowsTable } from './dedupe-window-statements.js';

const keyedLease = createTableSpec({
  table: 'mail',
  id: 'id',
  group: 'queue',
  retryAfter: 'retry_after',
  lockedUntil: 'locked_until',
  headers: 'headers',
  payload: 'payload',
  dedupeKey: 'dedupe_key',
});
const keyedRowLock = createTableSpec({ table: 'mail', id: 'id', payload: 'payload', dedupeKey: 'dedupe_key', processedAt: 'done_at' });

const postgres = createDialect('postgres');
const mysql = createDialect('mysql');
const mariadb = createDialect('mariadb');
const sqlite = createDialect('sqlite');

describe('dedupe keys in the DDL', () => {
  it('gives the key a column and a unique index over group and key: partial on Postgres and SQLite, plain on MySQL', () => {
    expect(postgres.schema.createTable(keyedLease)).toEqual([
      [
        'CREATE TABLE "mail" (',
        '  "id" BIGSERIAL PRIMARY KEY,',
        '  "queue" TEXT NOT NULL,',
        '  "retry_after" TIMESTAMPTZ NOT NULL DEFAULT now(),',
        '  "locked_until" TIMESTAMPTZ NULL,',
        '  "headers" JSONB NULL,',
        '  "payload" BYTEA NOT NULL,',
        '  "dedupe_key" TEXT NULL',
        ') WITH (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_cost_limit = 2000, autovacuum_analyze_scale_factor = 0.02)',
      ].join('\n'),
      'CREATE INDEX "mail_claim_order" ON "mail" ("queue", "retry_after", "id")',
      'CREATE UNIQUE INDEX "mail_dedupe_key" ON "mail" ("queue", "dedupe_key") WHERE "dedupe_key" IS NOT NULL',
    ]);
    expect(mysql.schema.createTable(keyedLease)[0]).toContain('  `dedupe_key` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin NULL\n');
    expect(mariadb.schema.createTable(keyedLease)[0]).toContain('  `dedupe_key` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NULL\n');
    expect(mysql.schema.createTable(keyedLease)[2]).toBe('CREATE UNIQUE INDEX `mail_dedupe_key` ON `mail` (`queue`, `dedupe_key`)');
    expect(sqlite.schema.createTable(keyedRowLock).at(-1)).toBe(
      'CREATE UNIQUE INDEX `mail_dedupe_key` ON `mail` (`dedupe_key`) WHERE `dedupe_key` IS NOT NULL',
    );
    const schemaTable = createTableSpec({ table: 'mail', schema: 'app', id: 'id', payload: 'payload', dedupeKey: 'k' });
    expect(sqlite.schema.createTable(schemaTable).at(-1)).toBe('CREATE UNIQUE INDEX `app`.`mail_dedupe_key` ON `mail` (`k`) WHERE `k` IS NOT NULL');
    expect(postgres.schema.createTable(schemaTable).at(-1)).toBe('CREATE UNIQUE INDEX "mail_dedupe_key" ON "app"."mail" ("k") WHERE "k" IS NOT NULL');
  });
});

describe('keyed inserts', () => {
  it('skip a held key in the insert itself on Postgres and SQLite, naming the partial index predicate', () => {
    const columns = ['queue', 'retry_after', 'headers', 'payload', 'dedupe_key'];
    expect(postgres.insert.rows(keyedLease, columns, 2, { skipHeldKeys: true }).sql).toBe(
      'INSERT INTO "mail" ("queue", "retry_after", "headers", "payload", "dedupe_key") VALUES ($1, $2, $3, $4, $5), ($6, $7, $8, $9, $10) ' +
        'ON CONFLICT ("queue", "dedupe_key") WHERE "dedupe_key" IS NOT NULL DO NOTHING RETURNING "id"',
    );
    expect(sqlite.insert.rows(keyedRowLock, ['payload', 'dedupe_key'], 1, { skipHeldKeys: true }).sql).toBe(
      'INSERT INTO `mail` (`payload`, `dedupe_key`) VALUES (?, ?) ON CONFLICT (`dedupe_key`) WHERE `dedupe_key` IS NOT NULL DO NOTHING RETURNING `id`',
    );
  });

  it('are plain inserts on MySQL and MariaDB, where a held key fails the statement', () => {
    expect(postgres.dedupe.heldKeyOnInsert).toBe('skipped');
    expect(sqlite.dedupe.heldKeyOnInsert).toBe('skipped');
    expect(mysql.dedupe.heldKeyOnInsert).toBe('error');
    expect(mariadb.dedupe.heldKeyOnInsert).toBe('error');
    expect(() => mysql.insert.rows(keyedLease, ['payload', 'dedupe_key'], 1, { skipHeldKeys: true })).toThrow(/errno 1062/);
  });
});

describe('dedupe statements', () => {
  it('read the holder of a key, with whether a live lease holds it on a lease table', () => {
    expect(postgres.dedupe.holder(keyedLease)).toEqual({
      name: 'dedupe.holder',
      sql:
        'SELECT "id", CASE WHEN "locked_until" > $1 THEN 1 ELSE 0 END AS "tablequeue_in_work" FROM "mail" WHERE "queue" = $2 AND "dedupe_key" = $3',
      params: ['now', 'group', 'dedupeKey'],
    });
    expect(mysql.dedupe.holder(keyedRowLock)).toEqual({
      name: 'dedupe.holder',
      sql: 'SELECT `id` FROM `mail` WHERE `dedupe_key` = ?',
      params: ['dedupeKey'],
    });
  });

  it('list the held keys among many (MySQL publishMany)', () => {
    expect(mysql.dedupe.heldKeys(keyedLease, 3)).toEqual({
      name: 'dedupe.heldKeys',
      sql: 'SELECT `dedupe_key` AS `tablequeue_key` FROM `mail` WHERE `queue` = ? AND `dedupe_key` IN (?, ?, ?)',
      params: ['group', 'dedupeKey', 'dedupeKey', 'dedupeKey'],
    });
  });

  it('take the key off a row only while a live lease holds it', () => {
    expect(sqlite.dedupe.releaseFromWork(keyedLease)).toEqual({
      name: 'dedupe.releaseFromWork',
      sql: 'UPDATE `mail` SET `dedupe_key` = NULL WHERE `id` = ? AND `queue` = ? AND `dedupe_key` = ? AND `locked_until` > ?',
      params: ['id', 'group', 'dedupeKey', 'now'],
    });
  });

  it('replace a waiting row’s values but never its id, group or key', () => {
    const columns = ['queue', 'retry_after', 'headers', 'payload', 'dedupe_key'];
    expect(postgres.dedupe.replaceWaiting(keyedLease, columns)).toEqual({
      name: 'dedupe.replaceWaiting',
      sql:
        'UPDATE "mail" SET "retry_after" = $1, "headers" = $2, "payload" = $3 ' +
        'WHERE "id" = $4 AND "queue" = $5 AND "dedupe_key" = $6 AND ("locked_until" IS NULL OR "locked_until" <= $7)',
      params: ['column:retry_after', 'column:headers', 'column:payload', 'id', 'group', 'dedupeKey', 'now'],
    });
  });

  it('read the unique indexes on MySQL and MariaDB only, where a missing one would let duplicates in unseen', () => {
    expect(mysql.dedupe.uniqueIndexes?.(keyedLease)).toEqual({
      name: 'dedupe.uniqueIndexes',
      sql:
        'SELECT INDEX_NAME AS `index_name`, COLUMN_NAME AS `column_name` FROM information_schema.STATISTICS ' +
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'mail' AND NON_UNIQUE = 0 ORDER BY INDEX_NAME, SEQ_IN_INDEX",
      params: [],
    });
    expect(mariadb.dedupe.uniqueIndexes?.(createTableSpec({ table: 'mail', schema: 'app', id: 'id', dedupeKey: 'k' }))?.sql).toContain(
      "TABLE_SCHEMA = 'app' AND TABLE_NAME = 'mail'",
    );
    expect(postgres.dedupe.uniqueIndexes).toBeUndefined();
    expect(sqlite.dedupe.uniqueIndexes).toBeUndefined();
  });

  it('refuse a table without the role, saying how to declare it', () => {
    const plain = createTableSpec({ table: 'mail', id: 'id', payload: 'payload' });
    expect(() => postgres.dedupe.holder(plain)).toThrow(DeclarationError);
    expect(() => postgres.dedupe.holder(plain)).toThrow(/dedupeKey: "dedupe_key"/);
  });
});

describe('settlements that keep a row free its key', () => {
  it('processedAt marks and dead letters into a group clear the key; a copied dead letter gets NULL', () => {
    expect(postgres.settle.finish(keyedRowLock, { fenced: false }).sql).toBe(
      'UPDATE "mail" SET "done_at" = $1, "dedupe_key" = NULL WHERE "id" = $2',
    );
    const [toGroup] = postgres.settle.deadLetter(keyedLease, [], { kind: 'group', group: 'dead' }, { fenced: true });
    expect(toGroup!.sql).toMatch(/^UPDATE "mail" SET "queue" = \$1, "dedupe_key" = NULL, "locked_until" = NULL, /);
    const [copy] = mysql.settle.deadLetter(keyedRowLock, ['id', 'payload', 'dedupe_key', 'done_at'], { kind: 'table', schema: undefined, name: 'dead_mail' }, { fenced: false });
    expect(copy!.sql).toBe('INSERT INTO `dead_mail` (`id`, `payload`, `dedupe_key`, `done_at`) SELECT `id`, `payload`, NULL, `done_at` FROM `mail` WHERE `id` = ?');
    expect(postgres.rowLock.finishMany!(keyedRowLock, 2).sql).toBe('UPDATE "mail" SET "done_at" = $1, "dedupe_key" = NULL WHERE "id" IN ($2, $3)');
    expect(mysql.rowLock.finishMany!(keyedRowLock, 2).sql).toBe(
      'UPDATE (SELECT ? AS `tablequeue_id` UNION ALL SELECT ?) AS `tablequeue_finished` STRAIGHT_JOIN `mail` FORCE INDEX (PRIMARY) ON `mail`.`id` = `tablequeue_finished`.`tablequeue_id` ' +
        'SET `done_at` = ?, `dedupe_key` = NULL',
    );
  });
});

describe('dedupeForMs windows', () => {
  const table = parseDedupeWindowsTable('tablequeue_dedupe_windows', 'postgres');

  it('create a table keyed by queue table, queue and key', () => {
    expect(createDedupeWindowStatements('mysql').createTable(table)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS `tablequeue_dedupe_windows` (',
        '  `queue_table` varbinary(1020) NOT NULL,',
        '  `queue_name` varbinary(1020) NOT NULL,',
        '  `dedupe_key` varbinary(1020) NOT NULL,',
        '  `opened_by` varchar(64) CHARACTER SET ascii NOT NULL,',
        '  `expires_at` datetime(6) NOT NULL,',
        '  PRIMARY KEY (`queue_table`, `queue_name`, `dedupe_key`)',
        ')',
      ].join('\n'),
    );
  });

  it('open a window in one upsert that changes the row only once its window has passed', () => {
    expect(createDedupeWindowStatements('postgres').open(table)).toEqual({
      name: 'dedupeWindow.open',
      sql:
        'INSERT INTO "tablequeue_dedupe_windows" AS "tablequeue_window" ("queue_table", "queue_name", "dedupe_key", "opened_by", "expires_at") VALUES ($1, $2, $3, $4, $5) ' +
        'ON CONFLICT ("queue_table", "queue_name", "dedupe_key") DO UPDATE SET "opened_by" = excluded."opened_by", "expires_at" = excluded."expires_at" ' +
        'WHERE "tablequeue_window"."expires_at" <= $6 RETURNING 1 AS "opened"',
      params: ['column:queue_table', 'column:queue_name', 'column:dedupe_key', 'column:opened_by', 'column:expires_at', 'now'],
    });
    expect(createDedupeWindowStatements('sqlite').open(table).sql).toContain('INSERT INTO `tablequeue_dedupe_windows` AS `tablequeue_window`');
  });

  it('on MySQL, set the opener before the expiry (assignments run left to right) and read the opener back', () => {
    const mysqlWindows = createDedupeWindowStatements('mysql');
    expect(mysqlWindows.opensInOneStatement).toBe(false);
    expect(mysqlWindows.open(table)).toEqual({
      name: 'dedupeWindow.open',
      sql:
        'INSERT INTO `tablequeue_dedupe_windows` (`queue_table`, `queue_name`, `dedupe_key`, `opened_by`, `expires_at`) VALUES (?, ?, ?, ?, ?) ' +
        'ON DUPLICATE KEY UPDATE `opened_by` = IF(`expires_at` <= ?, ?, `opened_by`), `expires_at` = IF(`expires_at` <= ?, ?, `expires_at`)',
      params: [
        'column:queue_table',
        'column:queue_name',
        'column:dedupe_key',
        'column:opened_by',
        'column:expires_at',
        'now',
        'column:opened_by',
        'now',
        'column:expires_at',
      ],
    });
    expect(mysqlWindows.openedBy(table)).toEqual({
      name: 'dedupeWindow.openedBy',
      sql: 'SELECT `opened_by` FROM `tablequeue_dedupe_windows` WHERE `queue_table` = ? AND `queue_name` = ? AND `dedupe_key` = ?',
      params: ['column:queue_table', 'column:queue_name', 'column:dedupe_key'],
    });
  });

  it("prune a batch of a queue table's passed windows in key order: PostgreSQL skips the ones a publish locked, MySQL limits its own DELETE", () => {
    expect(createDedupeWindowStatements('postgres').prunePassed(table)).toEqual({
      name: 'dedupeWindow.prunePassed',
      sql:
        'DELETE FROM "tablequeue_dedupe_windows" WHERE ("queue_table", "queue_name", "dedupe_key") IN (' +
        'SELECT "queue_table", "queue_name", "dedupe_key" FROM "tablequeue_dedupe_windows" WHERE "queue_table" = $1 AND "expires_at" <= $2 ' +
        'ORDER BY "queue_table", "queue_name", "dedupe_key" LIMIT $3 FOR UPDATE SKIP LOCKED)',
      params: ['column:queue_table', 'now', 'limit'],
    });
    expect(createDedupeWindowStatements('sqlite').prunePassed(table)).toEqual({
      name: 'dedupeWindow.prunePassed',
      sql:
        'DELETE FROM `tablequeue_dedupe_windows` WHERE (`queue_table`, `queue_name`, `dedupe_key`) IN (' +
        'SELECT `queue_table`, `queue_name`, `dedupe_key` FROM `tablequeue_dedupe_windows` WHERE `queue_table` = ? AND `expires_at` <= ? ' +
        'ORDER BY `queue_table`, `queue_name`, `dedupe_key` LIMIT ?)',
      params: ['column:queue_table', 'now', 'limit'],
    });
    expect(createDedupeWindowStatements('mysql').prunePassed(table)).toEqual({
      name: 'dedupeWindow.prunePassed',
      sql:
        'DELETE FROM `tablequeue_dedupe_windows` WHERE `queue_table` = ? AND `expires_at` <= ? ORDER BY `queue_table`, `queue_name`, `dedupe_key` LIMIT ?',
      params: ['column:queue_table', 'now', 'limit'],
    });
  });

  it('count what a prune would delete', () => {
    expect(createDedupeWindowStatements('postgres').countPassed(table)).toEqual({
      name: 'dedupeWindow.countPassed',
      sql: 'SELECT COUNT(*) AS "row_count" FROM "tablequeue_dedupe_windows" WHERE "queue_table" = $1 AND "expires_at" <= $2',
      params: ['column:queue_table', 'now'],
    });
    expect(createDedupeWindowStatements('mysql').countPassed(table).sql).toBe(
      'SELECT COUNT(*) AS `row_count` FROM `tablequeue_dedupe_windows` WHERE `queue_table` = ? AND `expires_at` <= ?',
    );
  });
});
