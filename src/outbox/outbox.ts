import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import { encodePayload } from '../delivery/codec.js';
import { DeclarationError, EncodeError } from '../errors.js';
import type { Publisher } from '../publish/publisher.js';
import { OUTBOX_RECORD_ID_HEADER, type OutboxDestination } from './destination.js';
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
  /** The destinations this broker relays `outbox` to. */
  destinationsOf(outbox: OutboxTable): readonly OutboxDestination[];
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
    if (typeof name !== 'string') {
      // write(name, payload) without the transaction shifts every argument one place.
      throw new DeclarationError(
        `${where}: write takes (transaction, name, payload, headers?); its second argument, the record's name, must be a string, got ${name === null ? 'null' : typeof name}`,
      );
    }
    if (name.length === 0) {
      throw new DeclarationError(`${where}: a record needs a non-empty name (the subject, routing key or queue it goes to)`);
    }
    if (headers !== undefined && headers !== null && typeof headers === 'object' && OUTBOX_RECORD_ID_HEADER in headers) {
      throw new DeclarationError(`${where}: the header "${OUTBOX_RECORD_ID_HEADER}" is set by the relay; remove it`);
    }
    const options = headers === undefined ? { tx } : { tx, headers };
    const publisher = this.#runtime.publisher();
    const written = this.#refuseWhatNoDestinationTakes(name, payload, headers ?? {}, where);
    const id = await publisher.publish(this.table.queueTable.queue(name), written, options);
    // A transactional handler's transaction wakes the relay when it commits; any other is the
    // service's to commit, at a moment the broker never learns.
    if (!(tx instanceof DeliveryTransaction)) this.#runtime.onUnseenCommit(this.table);
    return id;
  }

  /**
   * A record a destination of this broker's relay could never take would fail every send and
   * hold back its name's later records: it is refused here, before anything is written. The
   * payload is encoded once for the check and written as those bytes.
   */
  #refuseWhatNoDestinationTakes(name: string, payload: unknown, headers: Record<string, string>, where: string): unknown {
    const refusing = this.#runtime.destinationsOf(this.table).filter((destination) => destination.refusalOf !== undefined);
    if (refusing.length === 0) return payload;
    const bytes = encodePayload(payload, where);
    for (const destination of refusing) {
      const reason = destination.refusalOf!({ name, payload: bytes, headers });
      if (reason !== undefined) {
        throw new EncodeError(
          `${where}: this broker relays it to ${destination.description}, which could never take this record of "${name}": ${reason}; nothing was written`,
        );
      }
    }
    return bytes;
  }
}
