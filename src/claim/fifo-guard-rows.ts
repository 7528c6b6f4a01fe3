/**
 * The FIFO guard rows of MySQL and MariaDB (dialect/fifo-guard-statements.ts), made where a FIFO
 * claim will need them: the table when a FIFO subscription or an outbox relay opens, before its
 * statements are prepared, and a subscription's group row with it. A group that still has no row
 * at claim time (an outbox name met for the first time) gets it from the claim (claim-guard.ts).
 */
import { fifoGuardRowsFor, GUARD_ROW_COLUMN } from '../dialect/fifo-guard-statements.js';
import type { DialectName } from '../dialect/dialect.js';
import type { Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { bindStatement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

export async function ensureFifoGuardTable(driver: Driver, database: DialectName, spec: TableSpec): Promise<void> {
  const rows = spec.group?.fifo === true ? fifoGuardRowsFor(database) : undefined;
  if (rows !== undefined) await createSideTable(driver, 'fifo.createGuardTable', rows.createTable(spec));
}

/**
 * The table and the group's row. The row is looked for with a plain read first: an insert of a
 * row that exists waits for whichever claim holds it, in the row lock form for its whole delivery.
 * An insert that fails while another broker adds the same row (on Galera the nodes' inserts
 * conflict at commit) is tried again while the row is not seen.
 */
export async function ensureFifoGuardRow(driver: Driver, database: DialectName, spec: TableSpec, group: string | undefined): Promise<void> {
  const rows = spec.group?.fifo === true ? fifoGuardRowsFor(database) : undefined;
  if (rows === undefined || group === undefined) return;
  await ensureFifoGuardTable(driver, database, spec);
  const isThere = async () => Number((await driver.execute(bindStatement(rows.hasRow(spec), { group }))).rows[0]?.[GUARD_ROW_COLUMN]) === 1;
  if (await isThere()) return;
  for (let attempt = 1; ; attempt += 1) {
    try {
      await driver.execute(bindStatement(rows.addRow(spec), { group }));
      return;
    } catch (error) {
      // Another broker's insert of the row won. On Galera this node may not have applied it yet,
      // and its insert failed at commit with 1213 (seen in CI with brokers starting on three
      // nodes at once): look again, and insert again while the row is not seen.
      if (await isThere()) return;
      if (attempt === GUARD_ROW_INSERT_ATTEMPTS) throw error;
    }
  }
}

const GUARD_ROW_INSERT_ATTEMPTS = 3;
