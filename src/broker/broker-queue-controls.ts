import type { Queue, QueueTable } from '../definition/define-table.js';
import type { Subscription } from '../subscription/subscription.js';
import { notRunningError, type BrokerState } from './broker-lifecycle.js';
import {
  parseQueueControlPayload,
  queueControlKeyOf,
  QueueControls,
  type QueueControlKey,
  type QueueControlsOptions,
} from './queue-controls.js';

export interface BrokerQueueControlsOptions {
  /** The broker's state now: pause, resume and isPaused need it running. */
  readonly state: () => BrokerState;
  /** The broker's subscriptions, told to read their pause state again. */
  readonly subscriptions: () => Iterable<Subscription>;
  readonly onWarning: (message: string) => void;
}

/**
 * A broker's pause and resume: the queue controls table on its database, and its own
 * subscriptions told of a change at once (others read it within a poll interval, or hear it on
 * Postgres's `tablequeue_queue_controls` channel).
 */
export class BrokerQueueControls {
  readonly #options: BrokerQueueControlsOptions;
  #controls: QueueControls | undefined;
  #isTableCreated = false;

  constructor(options: BrokerQueueControlsOptions) {
    this.#options = options;
  }

  /** Whether `createTable` found or created the table. */
  get isTableCreated(): boolean {
    return this.#isTableCreated;
  }

  /** At start: the controls table on the broker's database. */
  open(options: QueueControlsOptions): QueueControls {
    this.#controls = new QueueControls(options);
    return this.#controls;
  }

  /**
   * A broker that may not create tables still runs: its subscriptions take their queues to run
   * until the table exists (each warns once that it cannot read it).
   */
  async createTable(): Promise<void> {
    try {
      await this.#controls?.createTable();
      this.#isTableCreated = this.#controls !== undefined;
    } catch (error) {
      this.#options.onWarning(
        `${error instanceof Error ? error.message : String(error)}; until it exists, subscriptions take their queues to run and pause() fails`,
      );
    }
  }

  async control(target: Queue<unknown> | QueueTable, action: 'pause' | 'resume'): Promise<void> {
    const key = queueControlKeyOf(target, `broker.${action}`);
    const controls = this.#require(`broker.${action}`);
    await (action === 'pause' ? controls.pause(key) : controls.resume(key));
    // This broker's own subscriptions need no notification.
    this.#refreshPaused(key);
  }

  async isPaused(queue: Queue<unknown>): Promise<boolean> {
    const key = queueControlKeyOf(queue, 'broker.isPaused');
    return this.#require('broker.isPaused').isPaused(key);
  }

  /** A notification on the controls channel: the queue it names, or every queue after a reconnect. */
  onNotification(payload: string | undefined): void {
    if (payload === undefined) {
      for (const subscription of this.#options.subscriptions()) subscription.refreshPaused();
      return;
    }
    const key = parseQueueControlPayload(payload);
    if (key !== undefined) this.#refreshPaused(key);
  }

  #require(what: string): QueueControls {
    const state = this.#options.state();
    if (state !== 'running' || this.#controls === undefined) throw notRunningError(state, what);
    return this.#controls;
  }

  #refreshPaused(key: QueueControlKey): void {
    for (const subscription of this.#options.subscriptions()) {
      const queue = subscription.queue;
      if (queue.table.spec.qualifiedName !== key.queueTable) continue;
      if (key.queueName === '' || queue.group === key.queueName) subscription.refreshPaused();
    }
  }
}
