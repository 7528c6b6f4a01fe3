import { describe, expect, it } from 'vitest';
import { DeclarationError, UnsupportedError } from '../../errors.js';
import {
  advisoryKeyTable,
  everyRoleAdvisoryTable,
  everyRoleLeaseTable,
  schemaAdvisoryTable,
  statementText,
} from '../test-tables.fixture.js';
import { createSqliteDialect } from './sqlite-dialect.js';

const sqlite = createSqliteDialect();

describe('sqlite capabilities', () => {
  it('has no session locks: advisory keys are kept in process', () => {
    expect(sqlite.capabilities.supportsSessionLocks).toBe(false);
  });
});

describe('sqlite advisory.candidates', () => {
  it('renders the key with ||, NULL columns as empty text, and carries no probe', () => {
    expect(statementText(sqlite.advisory.candidates(advisoryKeyTable.spec))).toEqual({
      name: 'advisory.candidates',
      sql: "SELECT `id`, CAST('jobs-' || ifnull(`tenant`, '') || '-' || ifnull(`id`, '') AS TEXT) AS `tablequeue_key` FROM `jobs` ORDER BY `id` LIMIT ?",
      params: ['limit'],
    });
  });

  it('selects only claimable rows of the group, in claim order', () => {
    expect(statementText(sqlite.advisory.candidates(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.candidates',
      sql: "SELECT `job_id`, CAST('mail-' || ifnull(`customer`, '') AS TEXT) AS `tablequeue_key` FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?",
      params: ['group', 'now', 'limit'],
    });
    expect(statementText(sqlite.advisory.candidates(schemaAdvisoryTable.spec)).sql).toBe(
      "SELECT `id`, CAST('o''k:' || ifnull(`id`, '') AS TEXT) AS `tablequeue_key` FROM `App`.`jobs` WHERE `done_at` IS NULL ORDER BY `id` LIMIT ?",
    );
  });

  it('refuses a table without a key template', () => {
    expect(() => sqlite.advisory.candidates(everyRoleLeaseTable.spec)).toThrow(DeclarationError);
    expect(() => sqlite.advisory.take(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns)).toThrow(DeclarationError);
  });
});

describe('sqlite advisory.lock and advisory.unlock', () => {
  it('are refused: SQLite has no session locks', () => {
    expect(() => sqlite.advisory.lock()).toThrow(UnsupportedError);
    expect(() => sqlite.advisory.unlock()).toThrow(/registry inside the process/);
  });
});

describe('sqlite advisory.take', () => {
  it('counts the attempt while the row is claimable and returns the attempt as it was', () => {
    const take = sqlite.advisory.take(everyRoleAdvisoryTable.spec, everyRoleAdvisoryTable.columns);
    if (take.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(take.statement)).toEqual({
      name: 'advisory.take',
      sql: 'UPDATE `email_jobs` SET `attempt` = `attempt` + 1 WHERE `job_id` = ? AND `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL RETURNING `job_id`, `queue`, `priority`, `customer`, `retry_after`, `attempt` - 1 AS `attempt`, `processed_at`, `meta`, `payload`',
      params: ['id', 'group', 'now'],
    });
  });

  it('only reads the row without an attempt column', () => {
    const take = sqlite.advisory.take(advisoryKeyTable.spec, advisoryKeyTable.columns);
    if (take.kind !== 'single') throw new Error('expected one statement');
    expect(statementText(take.statement)).toEqual({
      name: 'advisory.take',
      sql: 'SELECT `id`, `tenant`, `payload` FROM `jobs` WHERE `id` = ?',
      params: ['id'],
    });
  });
});

describe('sqlite advisory settlements', () => {
  it('retryAfter sets retry_after only, and is undefined without the column', () => {
    expect(statementText(sqlite.advisory.retryAfter(everyRoleAdvisoryTable.spec)!)).toEqual({
      name: 'advisory.retryAfter',
      sql: 'UPDATE `email_jobs` SET `retry_after` = ? WHERE `job_id` = ?',
      params: ['retryAfterAt', 'id'],
    });
    expect(sqlite.advisory.retryAfter(advisoryKeyTable.spec)).toBeUndefined();
  });
});

describe('sqlite advisory.keyOf', () => {
  it('reads the key of an unfinished row of the queue by id, due or not: what cancel locks', () => {
    expect(statementText(sqlite.advisory.keyOf(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.keyOf',
      sql: "SELECT CAST('mail-' || ifnull(`customer`, '') AS TEXT) AS `tablequeue_key` FROM `email_jobs` WHERE `job_id` = ? AND `queue` = ? AND `processed_at` IS NULL",
      params: ['id', 'group'],
    });
  });
});

describe('sqlite advisory.slotKeys', () => {
  it('numbers the slots for the process registry', () => {
    expect(statementText(sqlite.advisory.slotKeys(everyRoleAdvisoryTable.spec))).toEqual({
      name: 'advisory.slotKeys',
      sql: "WITH RECURSIVE tablequeue_slots (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM tablequeue_slots WHERE n < ?) SELECT 'tablequeue-slot/email_jobs/' || ? || '/' || n AS `tablequeue_key` FROM tablequeue_slots ORDER BY n",
      params: ['slots', 'group'],
    });
  });
});
