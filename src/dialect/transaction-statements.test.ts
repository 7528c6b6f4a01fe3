import { describe, expect, it } from 'vitest';
import { UnsupportedError } from '../errors.js';
import { createTableSpec } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import { everyRoleLeaseTable, reservedWordTable, statementText } from './test-tables.fixture.js';

const postgres = createDialect('postgres');
const mysql = createDialect('mysql');
const mariadb = createDialect('mariadb');
const sqlite = createDialect('sqlite');

describe('session savepoints (transactional mode)', () => {
  it('mark and undo the handler writes with the same text on every database', () => {
    for (const dialect of [postgres, mysql, sqlite]) {
      expect(statementText(dialect.session.savepoint())).toEqual({
        name: 'session.savepoint',
        sql: 'SAVEPOINT tablequeue_claimed',
        params: [],
      });
      expect(statementText(dialect.session.rollbackToSavepoint())).toEqual({
        name: 'session.rollbackToSavepoint',
        sql: 'ROLLBACK TO SAVEPOINT tablequeue_claimed',
        params: [],
      });
    }
  });
});

describe('lease.confirm (transactional mode)', () => {
  it('locks the row under the held token and writes the token back unchanged', () => {
    expect(statementText(postgres.lease.confirm(everyRoleLeaseTable.spec))).toEqual({
      name: 'lease.confirm',
      sql: 'UPDATE "email_jobs" SET "locked_until" = "locked_until" WHERE "job_id" = $1 AND "locked_until" = $2',
      params: ['id', 'held'],
    });
    for (const dialect of [mysql, sqlite]) {
      expect(statementText(dialect.lease.confirm(everyRoleLeaseTable.spec))).toEqual({
        name: 'lease.confirm',
        sql: 'UPDATE `email_jobs` SET `locked_until` = `locked_until` WHERE `job_id` = ? AND `locked_until` = ?',
        params: ['id', 'held'],
      });
    }
  });

  it('quotes reserved words', () => {
    expect(statementText(postgres.lease.confirm(reservedWordTable.spec)).sql).toBe(
      'UPDATE "user"."order" SET "where" = "where" WHERE "select" = $1 AND "where" = $2',
    );
  });
});

describe('isolation levels and SQLite begin modes per table', () => {
  const atLevel = (isolation: 'read uncommitted' | 'serializable') =>
    createTableSpec({ table: 'jobs', id: 'id', retryAfter: 'due', isolation });
  const withBeginMode = createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until', sqliteBegin: 'exclusive' });

  it('opens every level MySQL and MariaDB offer, and every level but read uncommitted on Postgres', () => {
    expect(() => mysql.validateTable(atLevel('read uncommitted'))).not.toThrow();
    expect(() => mariadb.validateTable(atLevel('serializable'))).not.toThrow();
    expect(() => postgres.validateTable(atLevel('serializable'))).not.toThrow();
    expect(() => postgres.validateTable(atLevel('read uncommitted'))).toThrow(UnsupportedError);
  });

  it('refuses a SQLite begin mode on Postgres and MySQL, naming isolation instead', () => {
    for (const dialect of [postgres, mysql, mariadb]) {
      expect(() => dialect.validateTable(withBeginMode)).toThrow(UnsupportedError);
      expect(() => dialect.validateTable(withBeginMode)).toThrow(/only SQLite has; remove it, and declare isolation/);
    }
    expect(() => sqlite.validateTable(withBeginMode)).not.toThrow();
  });

  it('refuses an isolation level on SQLite, naming sqliteBegin instead', () => {
    const leaseAtLevel = createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until', isolation: 'serializable' });
    expect(() => sqlite.validateTable(leaseAtLevel)).toThrow(UnsupportedError);
    expect(() => sqlite.validateTable(leaseAtLevel)).toThrow(/choose sqliteBegin/);
  });

  it('opens transactions at the declared level or begin mode', () => {
    expect(postgres.session.begin({ isolation: 'repeatable read' }).map(statementText)).toEqual([
      { name: 'session.begin', sql: 'BEGIN ISOLATION LEVEL REPEATABLE READ', params: [] },
    ]);
    expect(mysql.session.begin({ isolation: 'read uncommitted' }).map(statementText)).toEqual([
      { name: 'session.isolation', sql: 'SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED', params: [] },
      { name: 'session.begin', sql: 'START TRANSACTION', params: [] },
    ]);
    expect(sqlite.session.begin({ sqliteBegin: 'deferred' }).map(statementText)).toEqual([
      { name: 'session.begin', sql: 'BEGIN DEFERRED', params: [] },
    ]);
  });
});
