import { StatementError } from '../errors.js';

/** MySQL and MariaDB: a deadlock, and on a Galera cluster a certification failure or a brute-force abort. */
const DEADLOCK_ERRNO = 1213;
/** MySQL and MariaDB: a statement waited longer than `innodb_lock_wait_timeout` for a row lock. */
const LOCK_WAIT_TIMEOUT_ERRNO = 1205;
const POSTGRES_DEADLOCK = '40P01';
const SERIALIZATION_FAILURE = '40001';

/** Times a settlement rolled back by contention runs again at once before its failure is reported. */
export const MAX_SETTLEMENT_CONFLICT_RETRIES = 5;

/**
 * What stopped a statement that met other transactions, if that is what stopped it:
 *
 * - `conflict`: the whole transaction was rolled back because another one committed first or won
 *   a deadlock, so running it again from its start is safe and the database made progress: a
 *   deadlock (MySQL and MariaDB errno 1213, PostgreSQL 40P01), a serialization failure (40001),
 *   and on a Galera cluster a write another node committed first on the same row, which MariaDB
 *   reports as errno 1213 with SQLSTATE 40001 both as a certification failure (at COMMIT) and as
 *   the brute-force abort of a transaction holding the row's lock (at its next statement).
 * - `lock wait timeout`: MySQL or MariaDB errno 1205, a statement that waited for a lock too long;
 *   the holder may be stuck.
 */
export type Contention = 'conflict' | 'lock wait timeout';

export function contentionOf(error: unknown): Contention | undefined {
  if (!(error instanceof StatementError)) return undefined;
  if (error.errno === DEADLOCK_ERRNO || error.sqlState === POSTGRES_DEADLOCK || error.sqlState === SERIALIZATION_FAILURE) {
    return 'conflict';
  }
  return error.errno === LOCK_WAIT_TIMEOUT_ERRNO ? 'lock wait timeout' : undefined;
}

/** See `Contention`'s `conflict`. */
export function isRolledBackByConflict(error: unknown): boolean {
  return contentionOf(error) === 'conflict';
}
