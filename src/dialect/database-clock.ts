/**
 * Which clock a statement reads. A table declares `clock: 'host'` (the default: the broker binds
 * its own now) or `clock: 'database'`: the statements read the server's now, so brokers on hosts
 * whose clocks disagree still agree on when a row is due. The three databases' spellings sit side
 * by side here; each dialect puts its own into the style it renders with.
 */
import type { TableSpec } from '../table/table-spec.js';
import { databaseClock, param, type DatabaseClockSpelling, type SqlText } from './quoting.js';

/** `statement_timestamp()`: the start of the statement, so every row of one claim sees one instant. */
export const POSTGRES_CLOCK: DatabaseClockSpelling = Object.freeze({
  now: 'statement_timestamp()',
  // The cast types the parameter when the statement is prepared; a bare $n + interval would not.
  plusMicroseconds: (placeholder: string) => `statement_timestamp() + ${placeholder}::bigint * interval '1 microsecond'`,
});

/** UTC, as the driver binds host times into DATETIME columns; six digits keep the fractions. */
export const MYSQL_CLOCK: DatabaseClockSpelling = Object.freeze({
  now: 'UTC_TIMESTAMP(6)',
  plusMicroseconds: (placeholder: string) => `UTC_TIMESTAMP(6) + INTERVAL ${placeholder} MICROSECOND`,
});

/** The fixed-width text layout every SQLite time column holds, so the text compares as the instant. */
export const SQLITE_CLOCK: DatabaseClockSpelling = Object.freeze({
  now: "strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')",
  plusMicroseconds: (placeholder: string) =>
    `strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', (${placeholder} / 1000000.0) || ' seconds')`,
});

/** Now as the table's clock reads it: the bound `now`, or the database's own. */
export function nowOf(spec: TableSpec): SqlText {
  return spec.clock === 'database' ? databaseClock() : param('now');
}

/**
 * When a delayed row becomes due: the bound `retryAfterAt` the host computed, or on a
 * database-clock table the database's now plus the bound `delayMicroseconds`.
 */
export function dueAtOf(spec: TableSpec): SqlText {
  return spec.clock === 'database' ? databaseClock('delayMicroseconds') : param('retryAfterAt');
}
