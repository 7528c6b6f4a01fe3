import { describe, expect, it } from 'vitest';
import { GROUP_GUARD_COLUMN } from './dialect.js';
import { fifoGuardRowsFor } from './fifo-guard-statements.js';
import { fifoLeaseTable, minimalFifoLeaseTable, statementText } from './test-tables.fixture.js';

describe('FIFO guard rows', () => {
  const rows = fifoGuardRowsFor('mysql')!;

  it('MySQL and MariaDB: one row per group, beside the queue table, names compared exactly', () => {
    expect(rows.createTable(fifoLeaseTable.spec)).toBe(
      'CREATE TABLE IF NOT EXISTS `tablequeue_fifo_guards` (\n' +
        '  `table_name` varchar(129) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n' +
        '  `queue_name` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,\n' +
        '  PRIMARY KEY (`table_name`, `queue_name`)\n' +
        ')',
    );
    expect(rows.createTable(minimalFifoLeaseTable.spec)).toMatch(/^CREATE TABLE IF NOT EXISTS `app`\.`tablequeue_fifo_guards` \(/);
  });

  it('looks for the group row with a plain read and adds it unless it is there', () => {
    expect(statementText(rows.hasRow(minimalFifoLeaseTable.spec))).toEqual({
      name: 'fifo.hasGuardRow',
      sql: "SELECT CAST((SELECT COUNT(*) FROM `app`.`tablequeue_fifo_guards` WHERE `table_name` = 'app.jobs' AND `queue_name` = ?) AS SIGNED) AS `tablequeue_guard_row`",
      params: ['group'],
    });
    expect(statementText(rows.addRow(minimalFifoLeaseTable.spec))).toEqual({
      name: 'fifo.addGuardRow',
      sql: "INSERT IGNORE INTO `app`.`tablequeue_fifo_guards` (`table_name`, `queue_name`) VALUES ('app.jobs', ?)",
      params: ['group'],
    });
  });

  it('the guard locks the group row without waiting, in the column the claim reads', () => {
    expect(statementText(rows.guard(fifoLeaseTable.spec, GROUP_GUARD_COLUMN))).toEqual({
      name: 'fifo.guard',
      sql:
        "SELECT CAST((SELECT COUNT(*) FROM `tablequeue_fifo_guards` WHERE `table_name` = 'email_jobs' AND `queue_name` = ? FOR UPDATE SKIP LOCKED) AS SIGNED) AS `owned`, " +
        "CAST((SELECT COUNT(*) FROM `tablequeue_fifo_guards` WHERE `table_name` = 'email_jobs' AND `queue_name` = ?) AS SIGNED) AS `tablequeue_guard_row`",
      params: ['group', 'group'],
    });
  });

  it('no table on PostgreSQL (an advisory lock) or SQLite (one writer)', () => {
    expect(fifoGuardRowsFor('postgres')).toBeUndefined();
    expect(fifoGuardRowsFor('sqlite')).toBeUndefined();
  });
});
