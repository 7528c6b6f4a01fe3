/**
 * Where an outbox relay sends records. The relay hands a destination records of one name in
 * record order and marks them processed only after `send` resolves; `send` resolves only when the
 * destination has confirmed every record (JetStream ack, RabbitMQ publisher confirm, a committed
 * insert). A rejected `send` leaves every record of the call unprocessed, to be sent again after
 * a backoff, so destinations must tolerate resends: each message carries the record id in the
 * `OUTBOX_RECORD_ID_HEADER` header (and as JetStream's message id) for consumers to deduplicate.
 */

import type { Queue } from '../definition/define-table.js';
import type { PublishItem } from '../publish/publish-options.js';

/** The header that carries the outbox record id on every relayed message. */
export const OUTBOX_RECORD_ID_HEADER = 'tablequeue-outbox-id';

/** One outbox record as the relay read it. */
export interface OutboxRecord {
  /** The record id, as text whatever the column type. */
  readonly id: string;
  /** The name the service wrote it under: a subject, routing key or queue group. */
  readonly name: string;
  /** The payload bytes exactly as written. */
  readonly payload: Buffer;
  /** The headers the service wrote, plus `OUTBOX_RECORD_ID_HEADER`. */
  readonly headers: Readonly<Record<string, string>>;
}

export interface OutboxDestination {
  /** Shown in logs, errors and stats: `nats jetstream`, `rabbitmq exchange "events"`, … */
  readonly description: string;
  /** Connects; called once by the relay before the first send and again after a failed send. */
  open(): Promise<void>;
  /** Sends records (all of one name, in record order) and resolves when every one is confirmed. */
  send(records: readonly OutboxRecord[]): Promise<void>;
  /** Closes what `open` opened. Harmless to call twice or before `open`. */
  close(): Promise<void>;
  /**
   * Optional capability, with `sendWithin`: whether this destination writes into the database of
   * `broker`, the broker the relay runs on. When it answers true, the relay calls `sendWithin`
   * instead of `send`, inside the transaction that marks the records processed, so the records
   * arrive exactly once. Asked once, when the relay starts.
   */
  sharesDatabaseWith?(broker: object): boolean;
  /**
   * Writes the records through `transaction` (the relay's own transaction on the outbox's
   * database). The relay commits the writes together with the processed marks, or rolls both back
   * when this rejects.
   */
  sendWithin?(records: readonly OutboxRecord[], transaction: RelayTransaction): Promise<void>;
  /**
   * Optional: why this destination could never take a record (a sentence), or undefined when it
   * can. A record it refuses would fail every send and hold back its name's later records, so a
   * broker that relays an outbox here refuses to write such a record (`EncodeError`, nothing
   * written), and a relay that claims one (written by another process) names it in its error
   * instead of sending the batch. The relay passes the whole record; a write passes its name,
   * payload and headers (no `id`: the record is not written yet).
   */
  refusalOf?(record: RefusalCandidate): string | undefined;
}

/** What `OutboxDestination.refusalOf` is asked about: a record, or one about to be written. */
export type RefusalCandidate = Pick<OutboxRecord, 'name' | 'payload'> & Partial<Pick<OutboxRecord, 'id' | 'headers'>>;

/** What the relay lends `OutboxDestination.sendWithin`: its transaction on the outbox's database. */
export interface RelayTransaction {
  /**
   * Writes rows into a queue table of the relay's database inside the transaction, as
   * `broker.publishMany` does, and wakes that broker's subscriptions of the queue once it commits.
   */
  publishMany<Payload>(queue: Queue<Payload>, items: readonly PublishItem<Payload>[]): Promise<number>;
}
