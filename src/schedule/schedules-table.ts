import type { DdlDialectName } from '../definition/define-table.js';
import { createScheduleStatements, DEFAULT_SCHEDULES_TABLE, parseSchedulesTable } from '../dialect/schedule-statements.js';

/**
 * The schedules table's `CREATE TABLE IF NOT EXISTS`, for a migration of the service's own: a
 * broker with schedules creates it at start when missing, so running this first is optional.
 * `table` is `name` or `schema.name` (default `tablequeue_schedules`, the broker's default
 * `schedulesTable`).
 */
export function createSchedulesTableSql(database: DdlDialectName, table: string = DEFAULT_SCHEDULES_TABLE): string {
  return createScheduleStatements(database).createTable(parseSchedulesTable(table, database));
}
