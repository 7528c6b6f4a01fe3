import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { defineDedupeTable } from '../outbox/dedupe.js';
import { createSeenStatements, renderSeenCreateTable } from './outbox-seen-statements.js';
import { statementText } from './test-tables.fixture.js';

const seen = { schema: undefined, name: 'tablequeue_seen' };

describe('outbox.seen statements', () => {
  it('postgres: look up the pair, insert it unless present', () => {
    const statements = createSeenStatements('postgres', seen);
    expect(statementText(statements.find)).toEqual({
      name: 'outbox.seen.find',
      sql: 'SELECT 1 AS "seen" FROM "tablequeue_seen" WHERE "consumer" = $1 AND "record_id" = $2',
      params: ['column:consumer', 'column:record_id'],
    });
    expect(statementText(statements.insert)).toEqual({
      name: 'outbox.seen.insert',
      sql: 'INSERT INTO "tablequeue_seen" ("consumer", "record_id") VALUES ($1, $2) ON CONFLICT DO NOTHING',
      params: ['column:consumer', 'column:record_id'],
    });
  });

  it('mysql and mariadb: INSERT IGNORE', () => {
    const statements = createSeenStatements('mysql', { schema: 'app', name: 'seen' });
    expect(statementText(statements.find)).toEqual({
      name: 'outbox.seen.find',
      sql: 'SELECT 1 AS `seen` FROM `app`.`seen` WHERE `consumer` = ? AND `record_id` = ?',
      params: ['column:consumer', 'column:record_id'],
    });
    expect(statementText(statements.insert)).toEqual({
      name: 'outbox.seen.insert',
      sql: 'INSERT IGNORE INTO `app`.`seen` (`consumer`, `record_id`) VALUES (?, ?)',
      params: ['column:consumer', 'column:record_id'],
    });
  });

  it('sqlite: ON CONFLICT DO NOTHING', () => {
    const statements = createSeenStatements('sqlite', seen);
    expect(statementText(statements.find).sql).toBe('SELECT 1 AS `seen` FROM `tablequeue_seen` WHERE `consumer` = ? AND `record_id` = ?');
    expect(statementText(statements.insert)).toEqual({
      name: 'outbox.seen.insert',
      sql: 'INSERT INTO `tablequeue_seen` (`consumer`, `record_id`) VALUES (?, ?) ON CONFLICT DO NOTHING',
      params: ['column:consumer', 'column:record_id'],
    });
  });

  it('refuses a name over PostgreSQL’s 63 bytes', () => {
    expect(() => createSeenStatements('postgres', { schema: undefined, name: 'x'.repeat(64) })).toThrow(DeclarationError);
  });
});

describe('dedupe table createTableSql', () => {
  const table = defineDedupeTable({ table: 'tablequeue_seen' });

  it('keys the seen pairs by consumer and record id on every database', () => {
    expect(table.createTableSql('postgres')).toEqual([
      'CREATE TABLE "tablequeue_seen" (\n  "consumer" TEXT NOT NULL,\n  "record_id" TEXT NOT NULL,\n  "seen_at" TIMESTAMPTZ NOT NULL DEFAULT now(),\n  PRIMARY KEY ("consumer", "record_id")\n)',
    ]);
    for (const [dialect, collation] of [
      ['mysql', 'utf8mb4_0900_bin'],
      ['mariadb', 'utf8mb4_nopad_bin'],
    ] as const) {
      expect(table.createTableSql(dialect)).toEqual([
        `CREATE TABLE \`tablequeue_seen\` (\n  \`consumer\` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL,\n  \`record_id\` VARCHAR(255) CHARACTER SET utf8mb4 COLLATE ${collation} NOT NULL,\n  \`seen_at\` DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),\n  PRIMARY KEY (\`consumer\`, \`record_id\`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
      ]);
    }
    expect(table.createTableSql('sqlite')).toEqual([
      "CREATE TABLE `tablequeue_seen` (\n  `consumer` TEXT NOT NULL,\n  `record_id` TEXT NOT NULL,\n  `seen_at` TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')),\n  PRIMARY KEY (`consumer`, `record_id`)\n)",
    ]);
  });

  it('names the schema', () => {
    expect(renderSeenCreateTable('postgres', { schema: 'app', name: 'seen' })[0]).toMatch(/^CREATE TABLE "app"\."seen" \(/);
  });

  it('refuses names that are not plain identifiers, and unknown keys', () => {
    expect(() => defineDedupeTable({ table: 'seen; DROP TABLE x' })).toThrow(DeclarationError);
    expect(() => defineDedupeTable({ table: 'seen', days: 7 } as never)).toThrow(/unknown key "days"/);
  });
});
