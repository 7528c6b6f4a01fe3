import { describe, expect, it } from 'vitest';
import { createCancellationsTableSql } from '../broker/message-cancel.js';
import { createSchedulesTableSql } from '../schedule/schedules-table.js';
import { runCliHere } from './run-cli.fixture.js';
import { sideTableCatalogue, sideTablesScript } from './side-table-catalogue.js';

describe('tablequeue init --side-tables', () => {
  it('prints every side table of the URL scheme’s database, each after a line saying what creates it', async () => {
    const printed = await runCliHere(['init', '--database', 'postgres://app@db.internal/orders', '--side-tables']);
    expect(printed).toEqual({ code: 0, stdout: `${sideTablesScript('postgres')}\n`, stderr: '' });
    expect(printed.stdout).toContain(
      `-- tablequeue_cancellations: created by a broker with subscriptions, at start; cancel() and tablequeue cancel before their first record (option cancellationsTable)\n${createCancellationsTableSql('postgres')};\n`,
    );
    const mariadb = await runCliHere(['init', '--database', 'mariadb://app@db.internal/orders', '--side-tables']);
    expect(mariadb.stdout).toContain(`${createSchedulesTableSql('mariadb')};`);
  });

  it('lists the tables each database has: the concurrency and FIFO guards only on MySQL and MariaDB, no slots on SQLite', () => {
    const names = (database: 'postgres' | 'mysql' | 'sqlite') => sideTableCatalogue(database).map((entry) => entry.table);
    const everywhere = [
      'tablequeue_queue_controls',
      'tablequeue_cancellations',
      'tablequeue_brokers',
      'tablequeue_schedules',
      'tablequeue_maintenance',
      'tablequeue_rate_limits',
      'tablequeue_rate_limits_by_key',
      'tablequeue_dedupe_windows',
    ];
    expect(names('postgres')).toEqual([...everywhere, 'tablequeue_concurrency_slots', 'tablequeue_concurrency_key_slots']);
    expect(names('mysql')).toEqual([
      ...everywhere,
      'tablequeue_concurrency_guards',
      'tablequeue_fifo_guards',
      'tablequeue_concurrency_slots',
      'tablequeue_concurrency_key_slots',
    ]);
    expect(names('sqlite')).toEqual(everywhere);
    for (const entry of sideTableCatalogue('mysql')) expect(entry.sql).toMatch(new RegExp(`^CREATE TABLE IF NOT EXISTS \`${entry.table}\` \\(\\n`));
  });

  it('refuses the queue table and schedules flags beside it (exit 2)', async () => {
    const refused = await runCliHere(['init', '--database', 'sqlite:./queue.db', '--side-tables', '--table', 'jobs', '--schedules']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--side-tables prints the side tables' DDL only; drop --table, --schedules/);
  });
});
