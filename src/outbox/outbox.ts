import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import { DeclarationError } from '../errors.js';
import type { Publisher } from '../publish/publisher.js';
import { OUTBOX_RECORD_ID_HEADER } from './destination.js';
import type { OutboxTable } from './define-outbox.js';

/** What an outbox writer needs from its broker. */
export interface OutboxRuntime {
  /** The broker's publisher; throws `ClosedError` while the broker is not running. */
  publisher(): Publisher;
  /**
   * A record was written on a connection whose commit the broker cannot see (the service's own
   * client): relays of the table look again shortly after, as well as at once.
   */
  onUnseenCommit(outbox: OutboxTable): void;
}

/**
 * Writes outbox records on the service's own transaction, through the broker's publisher: the
 * record commits or rolls back with the service's writes. From `broker.outbox(table)`.
 */
export class Outbox {
  readonly table: OutboxTable;
  readonly #runtime: OutboxRuntime;

  constructor(table: OutboxTable, runtime: OutboxRuntime) {
    this.table = table;
    this.#runtime = runtime;
  }

  /**
   * Writes one record inside `tx` and returns its id. `tx` is a connection inside the service's
   * transaction: a pg client, a mysql2 connection, the better-sqlite3 handle, or a transactional
   * handler's `context.tx`. The payload is encoded like a published one (JSON, or bytes as
   * given); headers travel with it, and the relay adds the record id header.
   */
  async write<Payload>(tx: unknown, name: string, payload: Payload, headers?: Record<string, string>): Promise<string> {
    const where = `outbox "${this.table.label}"`;
    if (tx === undefined || tx === null) {
      throw new DeclarationError(
        `${where}: write needs the service's transaction (a pg client, a mysql2 connection, the better-sqlite3 handle or context.tx) as its first argument`,
      );
    }
    if (typeof name !== 'string' || name.length === 0) {
      throw new DeclarationError(`${where}: a record needs a non-empty name (the subject, routing key or queue it goes to)`);
    }
    if (headers !== undefined && headers !== null && typeof headers === 'object' && OUTBOX_RECORD_ID_HEADER in headers) {
      throw new DeclarationError(`${where}: the header "${OUTBOX_RECORD_ID_HEADER}" is set by the relay; remove it`);
    }
    const options = headers === undefined ? { tx } : { tx, headers };
    const id = await this.#runtime.publisher().publish(this.table.queueTable.queue(name), payload, options);
    // A transactional handler's transaction wakes the relay when it commits; any other is the
    // service's to commit, at a moment the broker never learns.
    if (!(tx instanceof DeliveryTransaction)) this.#runtime.onUnseenCommit(this.table);
    return id;
  }
}
