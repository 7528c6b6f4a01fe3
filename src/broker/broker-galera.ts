import type { Driver } from '../driver/driver.js';
import { UnsupportedError } from '../errors.js';
import type { TableSpec } from '../table/table-spec.js';
import type { GaleraOptions } from './broker-options.js';

/**
 * The start's checks on a Galera cluster (a MySQL or MariaDB node with `wsrep_on`). Galera
 * replicates a transaction's writes when it commits and certifies them against what other nodes
 * committed meanwhile; locks are never replicated. So `GET_LOCK` is the node's own, and brokers
 * on two nodes would both hold a key: the advisory lock form is refused. A row lock (`FOR UPDATE
 * SKIP LOCKED`) holds only on its node: brokers writing through two nodes both claim a row and
 * both run its handler, and one commit fails certification after the handler's work is done. The
 * row lock form is refused unless `galera.singleWriter` says every broker writes through one node.
 * The lease form's claim commits before the handler and its settlements are fenced by the lease
 * token, so a certification failure there is retried like a deadlock, on any number of nodes.
 */
export function checkGalera(
  options: { readonly galera: Readonly<GaleraOptions> | undefined },
  driver: Driver,
  tables: readonly TableSpec[],
): void {
  if (options.galera !== undefined && driver.kind !== 'mysql') {
    throw new UnsupportedError({
      database: driver.kind,
      feature: 'galera',
      message: `galera is for MySQL and MariaDB Galera clusters, and the database is ${driver.description}; remove the option`,
    });
  }
  if (driver.isGaleraNode !== true) return;
  const namesOf = (form: TableSpec['form']) =>
    tables.filter((spec) => spec.form === form).map((spec) => `"${spec.qualifiedName}"`);
  const advisory = namesOf('advisory');
  if (advisory.length > 0) {
    throw new UnsupportedError({
      database: 'galera',
      feature: 'advisory',
      message:
        `the advisory lock form cannot work on the Galera node at ${driver.description} (table ${advisory.join(', ')}): ` +
        'GET_LOCK takes a lock on the node that runs it and no other node sees it, so brokers on two nodes would both ' +
        'hold one key. Use the lease form (declare lockedUntil)',
    });
  }
  const rowLock = namesOf('rowLock');
  if (rowLock.length > 0 && options.galera?.singleWriter !== true) {
    throw new UnsupportedError({
      database: 'galera',
      feature: 'rowLock',
      message:
        `the row lock form needs one writer node on the Galera node at ${driver.description} (table ${rowLock.join(', ')}): ` +
        'a row lock holds on its own node only, so brokers writing through two nodes would both claim a row and run its ' +
        'handler, and one commit would fail certification after the work was done. Use the lease form (declare ' +
        'lockedUntil), or declare galera: { singleWriter: true } when every broker of these tables writes through one ' +
        'node (its own address, or a proxy that sends every write to one node)',
    });
  }
}
