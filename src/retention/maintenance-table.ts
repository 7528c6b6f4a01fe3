import type { DdlDialectName } from '../definition/define-table.js';
import { createRetentionStatements, DEFAULT_MAINTENANCE_TABLE, parseMaintenanceTable } from '../dialect/retention-statements.js';

/**
 * The maintenance table's `CREATE TABLE IF NOT EXISTS`, for a migration of the service's own: a
 * broker that retains a table creates it at start when missing, so running this first is
 * optional. `table` is `name` or `schema.name` (default `tablequeue_maintenance`, the retain
 * options' default `maintenanceTable`).
 */
export function createMaintenanceTableSql(database: DdlDialectName, table: string = DEFAULT_MAINTENANCE_TABLE): string {
  return createRetentionStatements(database).createMaintenanceTable(parseMaintenanceTable(table, database));
}
