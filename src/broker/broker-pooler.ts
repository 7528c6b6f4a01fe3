import { refusePoolerOffPostgres } from '../driver/create-driver.js';
import type { Driver, PoolerMode } from '../driver/driver.js';
import { DeclarationError, UnsupportedError } from '../errors.js';
import type { TableSpec } from '../table/table-spec.js';

/** Whether each transaction may run on another server session: declared, or found at open. */
export function isTransactionPooled(driver: Driver): boolean {
  return driver.pooler?.declared === 'transaction' || driver.pooler?.found === 'transaction';
}

/**
 * The start's checks of a pooler between the pool and the server: `pooler` only on PostgreSQL;
 * a transaction pooler found where none or a session pooler was declared; and, behind a
 * transaction pooler, no table of the advisory lock form, whose session locks would stay on the
 * server session that took them, held for whichever client gets it next.
 */
export function checkPooler(options: { readonly pooler: PoolerMode | undefined }, driver: Driver, tables: readonly TableSpec[]): void {
  const { pooler } = options;
  refusePoolerOffPostgres(driver, pooler, 'pooler');
  if (driver.pooler?.found === 'transaction' && pooler !== 'transaction') {
    throw new DeclarationError(
      `${driver.description} is a transaction pooler (PgBouncer's pool_mode = transaction, or alike): a session's ` +
        `transactions run on different server sessions${pooler === 'session' ? ", though pooler: 'session' was declared" : ''}. ` +
        "Declare pooler: 'transaction' in the broker's options (statements then run unnamed, the advisory lock form is refused, " +
        'listen needs a URL of its own), or connect through a session-mode pooler or to the server itself',
    );
  }
  if (!isTransactionPooled(driver)) return;
  const advisory = tables.filter((spec) => spec.form === 'advisory').map((spec) => `"${spec.qualifiedName}"`);
  if (advisory.length > 0) {
    throw new UnsupportedError({
      database: 'postgres',
      feature: 'advisory',
      message:
        `the advisory lock form cannot work through the transaction pooler at ${driver.description} (table ${advisory.join(', ')}): ` +
        'its locks belong to a server session, which the pooler hands to other clients between transactions. ' +
        'Use the lease or row lock form (declare lockedUntil, or neither), or give this broker a session-mode pooler or the server itself',
    });
  }
}
