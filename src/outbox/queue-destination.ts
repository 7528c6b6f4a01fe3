import { Queue, QueueTable } from '../definition/define-table.js';
import { jsonTextOf } from '../delivery/codec.js';
import { DeclarationError } from '../errors.js';
import type { PublishItem } from '../publish/publish-options.js';
import type { OutboxDestination, OutboxRecord, RefusalCandidate, RelayTransaction } from './destination.js';

/** What publishes into a queue on another database: a started `Broker` over it. */
export interface QueuePublisher {
  publishMany<Payload>(queue: Queue<Payload>, items: readonly PublishItem<Payload>[]): Promise<number>;
}

export interface QueueDestinationOptions {
  /**
   * The broker of the queue's database when it is not the relay's (started, and stopped after
   * the relay's broker). Records then arrive at least once, each with the record id header.
   * Default: the relay's broker, inside the relay's transaction: exactly once.
   */
  broker?: QueuePublisher;
}

/**
 * A tablequeue queue as an outbox destination. `target` is one queue, which takes every record,
 * or a grouped queue table, where each record goes to the queue named by the record's name. The
 * payload bytes and headers are published as written, plus the record id header; the table needs
 * a payload and a headers column.
 *
 * On the outbox's own database (no `broker` option, or the relay's broker) the relay inserts the
 * rows and marks the records processed in one transaction, so each record arrives exactly once.
 */
export function queueDestination(target: Queue<unknown> | QueueTable, options: QueueDestinationOptions = {}): OutboxDestination {
  const table = target instanceof Queue ? target.table : target;
  if (!(table instanceof QueueTable)) {
    throw new DeclarationError('queueDestination takes a queue (table.queue("name")) or a grouped queue table from defineTable');
  }
  const spec = table.spec;
  if (spec.payload === undefined || spec.headers === undefined) {
    throw new DeclarationError(
      `queueDestination: table "${spec.qualifiedName}" needs a payload and a headers column, which carry the record's bytes and its id header`,
    );
  }
  if (target instanceof QueueTable && spec.group === undefined) {
    throw new DeclarationError(
      `queueDestination: table "${spec.qualifiedName}" has no group column to take the record names; pass one queue, table.queue("name"), instead`,
    );
  }
  if (options === null || typeof options !== 'object' || Object.keys(options).some((key) => key !== 'broker')) {
    throw new DeclarationError('queueDestination: the only option is broker');
  }
  const otherBroker = options.broker;
  const queueOf = (records: readonly OutboxRecord[]): Queue<unknown> =>
    target instanceof Queue ? target : table.queue(records[0]!.name);
  const itemsOf = (records: readonly OutboxRecord[]): PublishItem<unknown>[] =>
    records.map((record) => ({ payload: record.payload, headers: { ...record.headers } }));
  const description =
    target instanceof Queue ? `tablequeue queue "${target.label}"` : `tablequeue table "${spec.qualifiedName}" (a queue per record name)`;
  // A bytes column takes any record: without the check, a write is not encoded twice for it.
  const refusalOf = (record: RefusalCandidate): string | undefined =>
    jsonTextOf(record.payload) === undefined
      ? `the payload column "${spec.payload}" of table "${spec.qualifiedName}" holds JSON, and the record's payload bytes are not UTF-8 JSON`
      : undefined;
  return {
    description,
    ...(spec.payloadHolds === 'json' ? { refusalOf } : {}),
    open: () => Promise.resolve(),
    close: () => Promise.resolve(),
    sharesDatabaseWith: (broker) => otherBroker === undefined || otherBroker === broker,
    sendWithin: async (records, transaction: RelayTransaction) => {
      if (records.length > 0) await transaction.publishMany(queueOf(records), itemsOf(records));
    },
    send: async (records) => {
      if (otherBroker === undefined) {
        throw new DeclarationError(`${description}: without the broker option the queue is on the relay's database, and the relay writes inside its own transaction`);
      }
      if (records.length > 0) await otherBroker.publishMany(queueOf(records), itemsOf(records));
    },
  };
}
