import { requireQueue, type Queue } from '../definition/define-table.js';
import { AlreadySubscribedError, DeclarationError } from '../errors.js';
import { createDedupeGate, type DedupeGate } from '../outbox/dedupe.js';
import {
  resolveSubscribeOptions,
  type BatchHandler,
  type Handler,
  type HandlerContext,
  type SubscribeOptions,
} from '../subscription/subscription-options.js';
import { Subscription, type SubscriptionRuntime, type ThreadInvoker, type ThreadRequest } from '../subscription/subscription.js';
import { ThreadHost } from '../threads/thread-host.js';
import type { TableSpec } from '../table/table-spec.js';
import type { BrokerState } from './broker-lifecycle.js';
import type { ResolvedBrokerOptions } from './broker-options.js';

/** A broker's subscriptions by queue: one per table and group. */
export function subscriptionKey(spec: TableSpec, group: string | undefined): string {
  return group === undefined ? spec.qualifiedName : `${spec.qualifiedName}\u0000${group}`;
}

/**
 * A `subscribe(...)` call checked (a queue, a handler or onThreads but not both, before
 * `start()`, once per queue) and added to the broker's subscriptions, its handler behind the
 * dedupe gate its options ask for.
 */
export function declareSubscription(
  queue: Queue<unknown>,
  handlerOrOptions: Handler<unknown> | BatchHandler<unknown> | SubscribeOptions<unknown>,
  maybeOptions: SubscribeOptions<unknown>,
  broker: {
    readonly state: BrokerState;
    readonly options: ResolvedBrokerOptions;
    readonly subscriptions: Map<string, Subscription>;
    readonly dedupeGates: DedupeGate[];
  },
): void {
  requireQueue(queue, 'subscribe');
  const handler = typeof handlerOrOptions === 'function' ? handlerOrOptions : undefined;
  const options = typeof handlerOrOptions === 'function' ? maybeOptions : (handlerOrOptions ?? {});
  if (handler === undefined && options.onThreads === undefined) {
    throw new DeclarationError(`subscribe to "${queue.label}": pass a handler function, or onThreads with the handler's module`);
  }
  if (handler !== undefined && options.onThreads !== undefined) {
    throw new DeclarationError(
      `subscribe to "${queue.label}": with onThreads the handler is onThreads.module's export; pass no handler function`,
    );
  }
  if (broker.state !== 'new') {
    throw new DeclarationError(`subscribe to "${queue.label}": declare subscriptions before broker.start()`);
  }
  const key = subscriptionKey(queue.table.spec, queue.group);
  if (broker.subscriptions.has(key)) {
    throw new AlreadySubscribedError(
      `queue "${queue.label}" is already subscribed on this broker; scale it with { workers: n } instead of a second subscription`,
    );
  }
  const resolved = resolveSubscribeOptions(options, broker.options, `subscription "${queue.label}"`);
  const dedupe = createDedupeGate(options.dedupe, {
    consumer: queue.label,
    transactional: resolved.transactional,
    batch: resolved.batch,
    isOnThreads: resolved.onThreads !== undefined,
  });
  if (dedupe !== undefined) broker.dedupeGates.push(dedupe);
  const deduplicated = dedupe !== undefined && handler !== undefined ? dedupe.wrap(handler as Handler<unknown>) : handler;
  broker.subscriptions.set(key, new Subscription(queue, deduplicated, resolved));
}

/**
 * At start: each subscription opened on the broker's pool, in declaration order, its handlers'
 * `context.query` on that pool and `context.publish` the broker's. Subscriptions that give up on
 * their handlers at the same stop share one cancel: one session of its own, not one per
 * subscription, cancels what runs on the broker's connections.
 */
export async function openSubscriptions(
  subscriptions: Iterable<Subscription>,
  runtime: Omit<SubscriptionRuntime, 'cancelStatements' | 'createContext' | 'openThreads'> & {
    /** The broker's `database` option: threads need a URL to open pools of their own. */
    readonly database: ResolvedBrokerOptions['database'];
    /** The broker's `pooler` option, which the threads' pools declare as the broker's does. */
    readonly pooler: ResolvedBrokerOptions['pooler'];
    readonly publish: HandlerContext['publish'];
  },
): Promise<void> {
  const { database, pooler, publish, ...shared } = runtime;
  const { driver } = shared;
  let cancelling: Promise<void> | undefined;
  const cancelStatements = (): Promise<void> => (cancelling ??= driver.cancelRunning().finally(() => (cancelling = undefined)));
  const createContext = (): Omit<HandlerContext, 'signal'> => ({
    query: async <Row>(sql: string, params: readonly unknown[] = []) =>
      (await driver.execute({ name: 'context.query', sql, values: params })).rows as Row[],
    publish,
  });
  const openThreads = (request: ThreadRequest): Promise<ThreadInvoker> => {
    if (typeof database !== 'string') {
      throw new DeclarationError(
        `subscription "${request.subscription}": onThreads needs the broker's database as a URL, since each thread opens its own pool`,
      );
    }
    return ThreadHost.start({ request, database, pooler, publish });
  };
  for (const subscription of subscriptions) await subscription.open({ ...shared, cancelStatements, createContext, openThreads });
}
