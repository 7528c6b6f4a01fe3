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
import { createMysqlDialect } from './mysql-dialect.js';

const mysql = createMysqlDialect({ mariadb: false });
const mariadb = createMysqlDialect({ mariadb: true });

/** The key as the statements render it: the database prefix, hashed when over 64 characters. */
function guardedKey(name: string): string {
  return `IF(CHAR_LENGTH(${name}) BETWEEN 1 AND 64, ${name}, SHA2(${name}, 256))`;
}

describe('mysql advisory.candidates', () => {
  it('prefixes the key with the database, hashes long names, and leaves out keys a session holds', () => {
    const key = guardedKey("CONCAT_WS('', LOWER(DATABASE()), '.', 'jobs-', `tenant`, '-', `id`)");
    expect(statementText(mysql.advisory.candidates(advisoryKeyTable.spec))).toEqual({
      name: 'advisory.candidates',
      sql: `SELECT \`id\`, ${key} AS \`tablequeue_key\` FROM \`jobs\` WHERE IS_USED_LOCK(${key}) IS NULL ORDER BY \`id\` LIMIT ?`,
      params: ['limit'],
    });
  });

  it('selects only claimable rows of the group, in claim order', () => {
    const key = guardedKey("CONCAT_WS('', LOWER(DATABASE()), '.', 'mail-', `customer`)");
    expect(statementText(mariadb.advisory.candidates(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.candidates',
      sql: `SELECT \`job_id\`, ${key} AS \`tablequeue_key\` FROM \`email_jobs\` WHERE \`queue\` = ? AND \`retry_after\` <= ? AND \`processed_at\` IS NULL AND IS_USED_LOCK(${key}) IS NULL ORDER BY \`priority\`, \`retry_after\`, \`job_id\` LIMIT ?`,
      params: ['group', 'now', 'limit'],
    });
  });

  it('prefixes a schema-qualified table with its declared schema, lower-cased like DATABASE()', () => {
    const key = guardedKey("CONCAT_WS('', LOWER('App'), '.', 'o''k:', `id`)");
    expect(statementText(mysql.advisory.candidates(schemaAdvisoryTable.spec)).sql).toBe(
      `SELECT \`id\`, ${key} AS \`tablequeue_key\` FROM \`App\`.\`jobs\` WHERE \`done_at\` IS NULL AND IS_USED_LOCK(${key}) IS NULL ORDER BY \`id\` LIMIT ?`,
    );
  });

  it('refuses a table without a key template', () => {
    expect(() => mysql.advisory.candidates(everyRoleTable.spec)).toThrow(DeclarationError);
  });

  it('reads the database clock on a clock: "database" table, delays included', () => {
    const databaseClock = createTableSpec({
      table: 'jobs',
      id: 'id',
      retryAfter: 'retry_after',
      advisoryLock: 'k-{id}',
      clock: 'database',
    });
    expect(statementText(mariadb.advisory.retryAfter(databaseClock)!)).toEqual({
      name: 'advisory.retryAfter',
      sql: 'UPDATE `jobs` SET `retry_after` = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND WHERE `id` = ?',
      params: ['delayMicroseconds', 'id'],
    });
    expect(statementText(mariadb.advisory.candidates(databaseClock)).sql).toContain('WHERE `retry_after` <= UTC_TIMESTAMP(6) AND IS_USED_LOCK(');
  });
});

describe('mysql advisory.lock and advisory.unlock', () => {
  it('GET_LOCK without waiting and RELEASE_LOCK, NULL read as 0, one integer each', () => {
    expect(statementText(mysql.advisory.lock())).toEqual({
      name: 'advisory.lock',
      sql: 'SELECT CAST(COALESCE(GET_LOCK(?, 0), 0) AS SIGNED) AS `confirmed`',
      params: ['key'],
    });
    expect(statementText(mariadb.advisory.unlock())).toEqual({
      name: 'advisory.unlock',
      sql: 'SELECT CAST(COALESCE(RELEASE_LOCK(?), 0) AS SIGNED) AS `confirmed`',
      params: ['key'],
    });
  });
});

describe('mysql advisory.take', () => {
  it('counts the attempt while the row is claimable, then reads it with the attempt as it was', () => {
    const take = mysql.advisory.take(everyRoleAdvisoryTable.spec, everyRoleAdvisoryTable.columns);
    expect(take.kind).toBe('countThenRead');
    if (take.kind !== 'countThenRead') return;
    expect(statementText(take.count)).toEqual({
      name: 'advisory.take',
      sql: 'UPDATE `email_jobs` SET `attempt` = `attempt` + 1 WHERE `job_id` = ? AND `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL',
      params: ['id', 'group', 'now'],
    });
    expect(statementText(take.read)).toEqual({
      name: 'advisory.read',
      sql: 'SELECT `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt` - 1 AS `attempt`, `processed_at`, `meta`, `payload` FROM `email_jobs` WHERE `job_id` = ?',
      params: ['id'],
    });
  });

  it('only reads the row under the same conditions without an attempt column', () => {
    const take = mariadb.advisory.take(advisoryKeyTable.spec, advisoryKeyTable.columns);
    if (take.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(take.statement)).toEqual({
      name: 'advisory.take',
      sql: 'SELECT `id`, `tenant`, `payload` FROM `jobs` WHERE `id` = ?',
      params: ['id'],
    });
  });
});

describe('mysql advisory settlements', () => {
  it('retryAfter sets retry_after only: the take counted the attempt', () => {
    expect(statementText(mysql.advisory.retryAfter(everyRoleAdvisoryTable.spec)!)).toEqual({
      name: 'advisory.retryAfter',
      sql: 'UPDATE `email_jobs` SET `retry_after` = ? WHERE `job_id` = ?',
      params: ['retryAfterAt', 'id'],
    });
    expect(mysql.advisory.retryAfter(advisoryKeyTable.spec)).toBeUndefined();
  });

  it('moves a dead letter into a table with two statements, which the form runs in one transaction', () => {
    const target = { kind: 'table', schema: 'App', name: 'dead_jobs' } as const;
    expect(mariadb.settle.deadLetter(schemaAdvisoryTable.spec, schemaAdvisoryTable.columns, target, { fenced: false }).map(statementText)).toEqual([
      {
        name: 'settle.deadLetter.copy',
        sql: 'INSERT INTO `App`.`dead_jobs` (`id`, `attempt`, `done_at`) SELECT `id`, `attempt`, `done_at` FROM `App`.`jobs` WHERE `id` = ?',
        params: ['id'],
      },
      { name: 'settle.deadLetter.remove', sql: 'DELETE FROM `App`.`jobs` WHERE `id` = ?', params: ['id'] },
    ]);
  });
});

describe('mysql advisory.keyOf', () => {
  it('reads the key of an unfinished row of the queue by id, due or not: what cancel locks', () => {
    expect(statementText(mysql.advisory.keyOf(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.keyOf',
      sql: "SELECT IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'mail-', `customer`)) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'mail-', `customer`), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'mail-', `customer`), 256)) AS `tablequeue_key` FROM `email_jobs` WHERE `job_id` = ? AND `queue` = ? AND `processed_at` IS NULL",
      params: ['id', 'group'],
    });
  });
});

describe('mysql advisory.slotKeys', () => {
  it('spells each slot as a row key: within the database, hashed past 64 characters', () => {
    expect(statementText(mysql.advisory.slotKeys(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.slotKeys',
      sql: "WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) SELECT IF(CHAR_LENGTH(CONCAT_WS('', LOWER(DATABASE()), '.', 'tablequeue-slot/email_jobs/', ?, '/', n)) BETWEEN 1 AND 64, CONCAT_WS('', LOWER(DATABASE()), '.', 'tablequeue-slot/email_jobs/', ?, '/', n), SHA2(CONCAT_WS('', LOWER(DATABASE()), '.', 'tablequeue-slot/email_jobs/', ?, '/', n), 256)) AS `tablequeue_key` FROM tablequeue_slots ORDER BY n",
      params: ['slots', 'group', 'group', 'group'],
    });
  });
});
