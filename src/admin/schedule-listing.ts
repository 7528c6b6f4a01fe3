import type { DialectName } from '../dialect/dialect.js';
import {
  createScheduleStatements,
  parseSchedulesTable,
  SCHEDULE_COLUMNS,
  type ScheduleStatements,
  type SchedulesTable,
} from '../dialect/schedule-statements.js';
import type { Driver } from '../driver/driver.js';
import { DeclarationError } from '../errors.js';
import { parseCron } from '../schedule/cron.js';
import { nextTickAfter } from '../schedule/tick-plan.js';
import { bindStatement } from '../statement.js';

/** One row of the schedules table, as `tablequeue schedules` and the dashboard show it. */
export interface ScheduleListed {
  readonly name: string;
  /** The queue table's qualified name and the group, as `table/group` (the table alone without a group). */
  readonly queue: string;
  readonly cron: string;
  readonly timeZone: string;
  /** The last tick fired (or passed over as missed), ISO; null before the first. */
  readonly lastTickAt: string | null;
  /** The next tick after the last one and now, by the cron and zone as declared; null when the row's cron does not parse here. */
  readonly nextTickAt: string | null;
  readonly firedCount: number;
  readonly missedCount: number;
  /** When a broker last declared the schedule (at its start): an old one is a schedule no code declares any more. */
  readonly declaredAt: string;
}

export interface ScheduleList {
  readonly table: string;
  /** By name. */
  readonly schedules: readonly ScheduleListed[];
  /** Why the table could not be read (missing until a broker with schedules starts); null when read. */
  readonly problem: string | null;
}

/** Reads the schedules table; never writes to it. */
export class ScheduleListing {
  readonly #driver: Driver;
  readonly #tableName: string;
  readonly #table: SchedulesTable;
  readonly #statements: ScheduleStatements;

  constructor(options: { driver: Driver; database: DialectName; table: string }) {
    this.#driver = options.driver;
    this.#tableName = options.table;
    this.#table = parseSchedulesTable(options.table, options.database);
    // The list reads the same on MySQL and MariaDB: only the DDL's collations differ.
    this.#statements = createScheduleStatements(options.database);
  }

  async list(now: Date = new Date()): Promise<ScheduleList> {
    let rows: Record<string, unknown>[];
    try {
      rows = (await this.#driver.execute(bindStatement(this.#statements.list(this.#table), {}))).rows;
    } catch (error) {
      const reason = error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error);
      return {
        table: this.#tableName,
        schedules: [],
        problem: `schedules table "${this.#tableName}" cannot be read (${reason}); start a broker with a schedule, or run tablequeue init --schedules, to create it`,
      };
    }
    return { table: this.#tableName, schedules: rows.map((row) => scheduleOf(row, now)), problem: null };
  }
}

function scheduleOf(row: Record<string, unknown>, now: Date): ScheduleListed {
  const c = SCHEDULE_COLUMNS;
  const lastTick = toDate(row[c.lastTickAt]);
  const queueName = String(row[c.queueName]);
  const cron = String(row[c.cron]);
  const timeZone = String(row[c.timeZone]);
  return {
    name: String(row[c.name]),
    queue: queueName === '' ? String(row[c.queueTable]) : `${String(row[c.queueTable])}/${queueName}`,
    cron,
    timeZone,
    lastTickAt: lastTick?.toISOString() ?? null,
    nextTickAt: nextTick(cron, timeZone, lastTick, now)?.toISOString() ?? null,
    firedCount: Number(row[c.firedCount]),
    missedCount: Number(row[c.missedCount]),
    declaredAt: toDate(row[c.updatedAt])?.toISOString() ?? '',
  };
}

/** A row another version wrote, or a zone this host does not know, shows no next tick rather than failing the list. */
function nextTick(cron: string, timeZone: string, lastTick: Date | null, now: Date): Date | null {
  try {
    return nextTickAfter(parseCron(cron, timeZone, 'schedules table'), lastTick, now);
  } catch (error) {
    if (error instanceof DeclarationError) return null;
    throw error;
  }
}

/** pg and mysql2 return a Date; SQLite the fixed-width text the driver wrote. */
function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}
