import type { Queue } from '../definition/define-table.js';
import { AlreadySubscribedError, DeclarationError } from '../errors.js';
import type { SubscribeOptionsBase } from '../subscription/subscription-options.js';

/**
 * What a by-name subscription (`subscribeTo`) takes: a subscription's options but the poll
 * interval and the lease, which are the broker's, and the dead-letter pair, which it refuses.
 */
export type ByNameSubscribeOptions<Payload = unknown> = Omit<SubscribeOptionsBase<Payload>, 'pollIntervalMs' | 'leaseMs'>;

/** Subscribes `queue` as `broker.subscribe` does: a handler and options, or (onThreads) the options alone. */
export type SubscribeQueue = (queue: Queue<unknown>, handlerOrOptions: unknown, options: unknown) => void;

/**
 * Subscribes to the queue `name` resolved to, after refusing what a by-name subscription cannot
 * take. A second name routed to a queue this broker already reads is refused with both in the
 * message: one subscription reads every name routed to a queue.
 */
export function subscribeByName(
  subscribe: SubscribeQueue,
  request: { name: string; queue: Queue<unknown>; handlerOrOptions: unknown; options: unknown; where: string },
): void {
  const { name, queue, where } = request;
  const options = typeof request.handlerOrOptions === 'function' ? request.options : request.handlerOrOptions;
  refuseQueueOptions(options, `${where}(${JSON.stringify(name)})`, queue);
  try {
    subscribe(queue, request.handlerOrOptions, request.options);
  } catch (error) {
    if (!(error instanceof AlreadySubscribedError)) throw error;
    throw new AlreadySubscribedError(
      `${where}(${JSON.stringify(name)}): the name routes to queue "${queue.label}", which this broker already reads; ` +
        'that subscription gets every message routed there, whatever its name, so subscribe to the queue once (scale it with { workers: n })',
    );
  }
}

/**
 * The reference system's by-name subscriptions refuse these, and for the same reasons: the name
 * only picks a queue, and what these options decide belongs to the queue.
 */
function refuseQueueOptions(options: unknown, where: string, queue: Queue<unknown>): void {
  if (options === null || typeof options !== 'object') return;
  const given = options as Record<string, unknown>;
  if (given.maxAttempts !== undefined || given.deadLetter !== undefined) {
    throw new DeclarationError(
      `${where}: a by-name subscription refuses maxAttempts and deadLetter. The name resolves to queue "${queue.label}", which ` +
        'also holds the messages of every other name routed to it, and a retry cap with a dead-letter destination decides the fate ' +
        "of every row of the queue, not of one name's. Declare them where the queue itself is read: " +
        'broker.subscribe(queue, handler, { maxAttempts, deadLetter })',
    );
  }
  if (given.pollIntervalMs !== undefined || given.leaseMs !== undefined) {
    throw new DeclarationError(
      `${where}: a by-name subscription runs with the broker's pollIntervalMs and leaseMs (new Broker({ pollIntervalMs, leaseMs })): ` +
        `the name only picks the queue, here "${queue.label}". To read that queue at its own pace, ` +
        'subscribe to it: broker.subscribe(queue, handler, { pollIntervalMs, leaseMs })',
    );
  }
}
