/**
 * Every side table a broker may create, with what creates it and when: what `tablequeue init
 * --side-tables` prints for a service whose tables come from its own migrations (a role that may
 * not create tables). docs/side-tables.md says the same for a person, with the grants.
 */
import { createCancellationsTableSql } from '../broker/message-cancel.js';
import { createQueueControlsTableSql } from '../broker/queue-controls.js';
import { defineTable, type DdlDialectName } from '../definition/define-table.js';
import {
  CONCURRENCY_GUARDS_TABLE,
  CONCURRENCY_KEY_SLOTS_TABLE,
  CONCURRENCY_SLOTS_TABLE,
  createConcurrencyStatements,
} from '../dialect/concurrency-statements.js';
import { DEFAULT_CANCELLATIONS_TABLE } from '../dialect/cancellation-statements.js';
import { DEFAULT_DEDUPE_WINDOWS_TABLE } from '../dialect/dedupe-window-statements.js';
import { FIFO_GUARDS_TABLE, fifoGuardRowsFor } from '../dialect/fifo-guard-statements.js';
import { createHeartbeatStatements, DEFAULT_HEARTBEAT_TABLE, parseHeartbeatTable } from '../dialect/heartbeat-statements.js';
import { DEFAULT_QUEUE_CONTROLS_TABLE } from '../dialect/queue-control-statements.js';
import { DEFAULT_RATE_LIMITS_TABLE } from '../dialect/rate-limit-statements.js';
import { DEFAULT_MAINTENANCE_TABLE } from '../dialect/retention-statements.js';
import { DEFAULT_SCHEDULES_TABLE } from '../dialect/schedule-statements.js';
import { createDedupeWindowsTableSql } from '../publish/dedupe-windows.js';
import { createMaintenanceTableSql } from '../retention/maintenance-table.js';
import { createSchedulesTableSql } from '../schedule/schedules-table.js';
import { createRateLimitsByKeyTableSql, createRateLimitsTableSql } from '../subscription/rate-limit.js';

export interface SideTableEntry {
  /** The table's default name. */
  readonly table: string;
  /** What makes a broker create it, and when. */
  readonly createdBy: string;
  /** `CREATE TABLE IF NOT EXISTS`, without the final semicolon. */
  readonly sql: string;
}

/**
 * The concurrency tables live beside each limited queue table, in its schema: their DDL is
 * rendered for a queue table without one, so they land in the connection's default schema.
 */
const UNQUALIFIED_QUEUE_TABLE = defineTable({ table: 'jobs', id: 'id' }).spec;

/** Every side table of `database` under its default name, in the order a broker's start meets them. */
export function sideTableCatalogue(database: DdlDialectName): SideTableEntry[] {
  const entries: SideTableEntry[] = [
    {
      table: DEFAULT_QUEUE_CONTROLS_TABLE,
      createdBy: 'a broker with subscriptions, at start; pause() and tablequeue pause before their first write (option queueControlsTable)',
      sql: createQueueControlsTableSql(database),
    },
    {
      table: DEFAULT_CANCELLATIONS_TABLE,
      createdBy: 'a broker with subscriptions, at start; cancel() and tablequeue cancel before their first record (option cancellationsTable)',
      sql: createCancellationsTableSql(database),
    },
    {
      table: DEFAULT_HEARTBEAT_TABLE,
      createdBy: 'a broker with the heartbeat option, at start (heartbeat.table)',
      sql: createHeartbeatStatements(database).createTable(parseHeartbeatTable(DEFAULT_HEARTBEAT_TABLE, database)),
    },
    {
      table: DEFAULT_SCHEDULES_TABLE,
      createdBy: 'a broker with schedules, at start; tablequeue init --schedules (option schedulesTable)',
      sql: createSchedulesTableSql(database),
    },
    {
      table: DEFAULT_MAINTENANCE_TABLE,
      createdBy: 'a broker with retain(), at start (retain option maintenanceTable)',
      sql: createMaintenanceTableSql(database),
    },
    {
      table: DEFAULT_RATE_LIMITS_TABLE,
      createdBy: 'a subscription with rate, when it opens at start (option rateLimitsTable)',
      sql: createRateLimitsTableSql(database),
    },
    {
      table: `${DEFAULT_RATE_LIMITS_TABLE}_by_key`,
      createdBy: 'a subscription with rate.key, when it opens at start (named after the rate limits table)',
      sql: createRateLimitsByKeyTableSql(database),
    },
    {
      table: DEFAULT_DEDUPE_WINDOWS_TABLE,
      createdBy: "a broker's first publish with dedupeForMs, or its start with retain({ dedupeWindows: true }) (option dedupeWindowsTable)",
      sql: createDedupeWindowsTableSql(database),
    },
  ];
  const concurrency = createConcurrencyStatements(database === 'mariadb' ? 'mysql' : database);
  const guards = concurrency.createGuardTable(UNQUALIFIED_QUEUE_TABLE);
  if (guards !== undefined) {
    entries.push({
      table: CONCURRENCY_GUARDS_TABLE,
      createdBy: 'a lease subscription with concurrency, or a row lock one with concurrency.perKey, when it opens at start; beside its queue table, in its schema',
      sql: guards,
    });
  }
  const fifoGuards = fifoGuardRowsFor(database === 'mariadb' ? 'mysql' : database);
  if (fifoGuards !== undefined) {
    entries.push({
      table: FIFO_GUARDS_TABLE,
      createdBy: 'a FIFO subscription or an outbox relay, when it opens at start; beside its queue table, in its schema',
      sql: fifoGuards.createTable(UNQUALIFIED_QUEUE_TABLE),
    });
  }
  if (concurrency.slots !== undefined) {
    entries.push({
      table: CONCURRENCY_SLOTS_TABLE,
      createdBy: 'a row lock subscription with concurrency.global, when it opens at start; beside its queue table, in its schema',
      sql: concurrency.slots.createTable(UNQUALIFIED_QUEUE_TABLE),
    });
  }
  if (concurrency.keySlots !== undefined) {
    entries.push({
      table: CONCURRENCY_KEY_SLOTS_TABLE,
      createdBy: 'a row lock subscription with concurrency.perKey, when it opens at start; beside its queue table, in its schema',
      sql: concurrency.keySlots.createTable(UNQUALIFIED_QUEUE_TABLE),
    });
  }
  return entries;
}

/** The catalogue as one SQL text: each table's comment line, then its statement. */
export function sideTablesScript(database: DdlDialectName): string {
  return sideTableCatalogue(database)
    .map((entry) => `-- ${entry.table}: created by ${entry.createdBy}\n${entry.sql};`)
    .join('\n\n');
}
