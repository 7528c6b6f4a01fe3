import { Queue as QueueClass, type Queue } from '../definition/define-table.js';
import { DeclarationError } from '../errors.js';
import type { CancellationRecords } from '../subscription/cancellation-watch.js';
import type { Subscription } from '../subscription/subscription.js';
import { notRunningError, type BrokerState } from './broker-lifecycle.js';
import { MessageCanceller, parseCancellationNotice, type CancelResult, type MessageCancellerOptions } from './message-cancel.js';

export interface BrokerCancellationOptions {
  /** The broker's state now: cancel needs it running. */
  readonly state: () => BrokerState;
  /** The broker's subscriptions, whose handlers a cancel of a message they run reaches. */
  readonly subscriptions: () => Iterable<Subscription>;
  readonly onWarning: (message: string) => void;
}

/**
 * A broker's `cancel`: the canceller on its database, and the handlers of its own subscriptions
 * told of a cancel of a message they run, whether this broker cancelled it or another announced it.
 */
export class BrokerCancellation {
  readonly #options: BrokerCancellationOptions;
  #canceller: MessageCanceller | undefined;

  constructor(options: BrokerCancellationOptions) {
    this.#options = options;
  }

  /** At start: the canceller on the broker's database. */
  open(options: MessageCancellerOptions): MessageCanceller {
    this.#canceller = new MessageCanceller(options);
    return this.#canceller;
  }

  /**
   * The records for the subscriptions to read. Without the table (a role that may not create
   * one), cancels still remove waiting messages once someone creates it, but none reaches a
   * message this broker has in work.
   */
  async createTable(): Promise<CancellationRecords | undefined> {
    const canceller = this.#canceller;
    if (canceller === undefined) return undefined;
    try {
      await canceller.createTable();
      return canceller.records;
    } catch (error) {
      this.#options.onWarning(
        `${error instanceof Error ? error.message : String(error)}; cancels of messages this broker has in work will not reach it (create the cancellations table, or name one it may create with the cancellationsTable option)`,
      );
      return undefined;
    }
  }

  async cancel(queue: Queue<unknown>, id: string): Promise<CancelResult> {
    if (!(queue instanceof QueueClass) || typeof id !== 'string' || id === '') {
      throw new DeclarationError("broker.cancel needs a queue from table.queue(name) and a message id as text, such as broker.cancel(emails, '42')");
    }
    const state = this.#options.state();
    if (state !== 'running' || this.#canceller === undefined) throw notRunningError(state, 'broker.cancel');
    const result = await this.#canceller.cancel(queue, id);
    // This broker's own delivery of it, if any, hears now rather than at its next renewal or poll.
    if (result.status === 'inWork') {
      for (const subscription of this.#options.subscriptions()) {
        if (subscription.queue.table.spec.qualifiedName === queue.table.spec.qualifiedName && subscription.queue.group === queue.group) {
          subscription.cancelInWork(id);
        }
      }
    }
    return result;
  }

  /**
   * A cancel of a message in work, announced by the canceller after its record committed: the
   * subscription of that table that runs the row tells its handler. A notice lost in a reconnect
   * is read from the records at the next poll.
   */
  onNotice(payload: string | undefined): void {
    const notice = payload === undefined ? undefined : parseCancellationNotice(payload);
    if (notice === undefined) return;
    for (const subscription of this.#options.subscriptions()) {
      if (subscription.queue.table.spec.qualifiedName === notice.queueTable) subscription.cancelInWork(notice.id);
    }
  }
}
