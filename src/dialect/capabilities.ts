// The three databases side by side, so their differences read as one table.
import type { DialectCapabilities } from './dialect.js';

export const POSTGRES_CAPABILITIES: DialectCapabilities = Object.freeze({
  supportsRowLock: true,
  supportsUpdateReturning: true,
  supportsDeleteReturning: true,
  supportsInsertReturning: true,
  hasSingleWriter: false,
  sharesSessionWithService: false,
  leaseClaimLocksRows: false,
  leaseClaimReturnsCountedAttempt: false,
  // READ UNCOMMITTED is accepted by Postgres but runs as READ COMMITTED: not offered.
  isolationLevels: Object.freeze(['read committed', 'repeatable read', 'serializable'] as const),
  supportsListenNotify: true,
  supportsSessionLocks: true,
});

/** MySQL and MariaDB share one dialect; MariaDB adds `DELETE … RETURNING` and `INSERT … RETURNING`. */
export function mysqlCapabilities(options: { mariadb: boolean }): DialectCapabilities {
  return Object.freeze({
    supportsRowLock: true,
    supportsUpdateReturning: false,
    supportsDeleteReturning: options.mariadb,
    supportsInsertReturning: options.mariadb,
    hasSingleWriter: false,
    sharesSessionWithService: false,
    leaseClaimLocksRows: true,
    leaseClaimReturnsCountedAttempt: false,
    isolationLevels: Object.freeze(['read uncommitted', 'read committed', 'repeatable read', 'serializable'] as const),
    supportsListenNotify: false,
    supportsSessionLocks: true,
  });
}

export const SQLITE_CAPABILITIES: DialectCapabilities = Object.freeze({
  supportsRowLock: false,
  supportsUpdateReturning: true,
  supportsDeleteReturning: true,
  supportsInsertReturning: true,
  hasSingleWriter: true,
  // A broker given the service's handle runs its statements on the session the service writes on.
  sharesSessionWithService: true,
  leaseClaimLocksRows: false,
  // The claim is one `UPDATE … RETURNING`, which returns rows as written: attempt already counted.
  leaseClaimReturnsCountedAttempt: true,
  // SQLite transactions are serializable; the begin mode (sqliteBegin) is the only choice.
  isolationLevels: Object.freeze([] as const),
  supportsListenNotify: false,
  // Advisory keys live in a registry inside the process (src/claim/in-process-lock-registry.ts).
  supportsSessionLocks: false,
});
