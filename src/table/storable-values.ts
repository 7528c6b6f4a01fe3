/**
 * The values a queue table's role columns store and compare unchanged on every database, as
 * `createTableSql` declares them (dialect/<db>/<db>-ddl.ts; storable-values.test.ts holds the two
 * together). The same limits hold on every database, so a publish that works on one works on all.
 */

/** The priority column is SMALLINT on PostgreSQL and MySQL/MariaDB (SQLite's INTEGER holds more). */
export const MIN_PRIORITY = -32_768;
export const MAX_PRIORITY = 32_767;

/** The group column is VARCHAR(255) on MySQL/MariaDB, which counts characters, not bytes. */
export const MAX_QUEUE_NAME_CHARACTERS = 255;

/** The dedupe key column is VARCHAR(255) on MySQL/MariaDB too, so a key is at most 255 characters. */
export const MAX_DEDUPE_KEY_CHARACTERS = 255;

/**
 * Instants from year 1 to year 9999. MySQL's DATETIME ends at 9999; SQLite keeps times as
 * fixed-width text that sorts as time only while the year has four digits (`+010000-…` sorts
 * before `2026-…`, so a row due in year 10000 would be due at once); and a JavaScript Date past
 * ±8.64e15 ms is invalid, which failed inside the driver as it bound the value.
 */
export const EARLIEST_STORABLE_TIME_MS = Date.parse('0001-01-01T00:00:00.000Z');
export const LATEST_STORABLE_TIME_MS = Date.parse('9999-12-31T23:59:59.999Z');

/** Whether an instant (ms since the epoch) is within the years every database stores; false for NaN. */
export function isStorableTime(timeMs: number): boolean {
  return timeMs >= EARLIEST_STORABLE_TIME_MS && timeMs <= LATEST_STORABLE_TIME_MS;
}
