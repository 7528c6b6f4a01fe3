import { EventEmitter } from 'node:events';
import type { Queue, QueueTable } from '../definition/define-table.js';
import { Queue as QueueClass } from '../definition/define-table.js';
import type { Dialect } from '../dialect/dialect.js';
import { parseRateLimitsTable } from '../dialect/rate-limit-statements.js';
import type { Driver, PoolStats } from '../driver/driver.js';
import { createDriver } from '../driver/create-driver.js';
import { AlreadySubscribedError, ClosedError, DeclarationError, UnsupportedError, type QueueError } from '../errors.js';
import type { KeyedPublishOptions, KeyedPublishResult, PublishItem, PublishOptions } from '../publish/publish-options.js';
import { Publisher } from '../publish/publisher.js';
import { millisecondsFromZero } from '../option-checks.js';
import type { StandardSchemaV1 } from '../delivery/standard-schema.js';
import {
  Subscription,
  type SubscriptionStats,
  type ThreadInvoker,
  type ThreadRequest,
} from '../subscription/subscription.js';
import { ThreadHost } from '../threads/thread-host.js';
import { checkConnectionLimit } from '../threads/thread-pool-budget.js';
import {
  resolveSubscribeOptions,
  type BatchHandler,
  type Handler,
  type ThreadOptions,
  type HandlerContext,
  type SubscribeOptions,
} from '../subscription/subscription-options.js';
import type { SubscriptionTestHooks } from '../subscription/subscription-test-hooks.js';
import type { LifecycleEvents, LifecycleEventSink } from '../subscription/lifecycle-events.js';
import type { TableSpec } from '../table/table-spec.js';
import { resolveBrokerOptions, type BrokerOptions, type ResolvedBrokerOptions } from './broker-options.js';
import { errorLogLine } from './error-log-line.js';
import { Heartbeat } from './heartbeat.js';
import { reportedError } from './reported-error.js';
import { NotifyListener, type ListenerStats, type NotifyListenerOptions } from './notify-listener.js';
import {
  parseQueueControlPayload,
  QUEUE_CONTROLS_CHANNEL,
  queueControlKeyOf,
  QueueControls,
  type QueueControlKey,
} from './queue-controls.js';
import type { MetricsEndpoint, ServeMetricsOptions } from '../observability/metrics-endpoint.js';
import { Observability } from '../observability/observability.js';
import { openDialect } from './open-dialect.js';
import { warnOfLooseTextCollations } from './text-collation-check.js';
import { createDedupeGate, type DedupeGate } from '../outbox/dedupe.js';
import type { OutboxTable } from '../outbox/define-outbox.js';
import type { OutboxDestination } from '../outbox/destination.js';
import { Outbox } from '../outbox/outbox.js';
import { Relay } from '../outbox/relay.js';
import type { RelayStats } from '../outbox/relay-runtime.js';
import { resolveRelayOptions, type RelayOptions } from '../outbox/relay-options.js';
import { resolveScheduleDeclaration, type ScheduleDeclaration, type ScheduleOptions } from '../schedule/schedule-options.js';
import { Scheduler, type ScheduleStats, type SchedulerTestHooks } from '../schedule/scheduler.js';
import { QueueTable as QueueTableClass } from '../definition/define-table.js';
import { resolveRetentionDeclaration, type RetainOptions, type RetentionDeclaration } from '../retention/retention-options.js';
import { Retainer, type RetainerTestHooks, type RetentionStats } from '../retention/retainer.js';
import { CANCELLATIONS_CHANNEL, MessageCanceller, parseCancellationNotice, type CancelResult } from './message-cancel.js';
import type { CancellationRecords } from '../subscription/cancellation-watch.js';

/**
 * How long `stop()` waits for the pool to close after every connection it lent was destroyed;
 * a closing pool only ends idle sessions, which takes milliseconds.
 */
const POOL_CLOSE_TIMEOUT_MS = 5_000;

export interface BrokerStats {
  readonly pool: PoolStats;
  readonly subscriptions: SubscriptionStats[];
  /** The LISTEN session (Postgres with `listen` on and at least one subscription); undefined without one. */
  readonly listener: ListenerStats | undefined;
  /** One per `relay(...)`, in declaration order. */
  readonly relays: RelayStats[];
  /** One per `schedule(...)`, in declaration order. */
  readonly schedules: ScheduleStats[];
  /** One per `retain(...)`, in declaration order: runs, the last run and the rows it deleted. */
  readonly retention: RetentionStats[];
}

/** What wake-ups across processes need from the dialect and the driver. */
type ListenSupport = Pick<NotifyListenerOptions, 'statements' | 'openSession'>;

/**
 * The broker's events: `error` and `warning`, and the lifecycle of deliveries (`settled`,
 * `retrying`, `deadLettered`, `timedOut`, `leaseLost`, `cancelled`; see
 * subscription/lifecycle-events.ts), built only while something listens to them.
 */
export interface BrokerEvents extends LifecycleEvents {
  /**
   * Everything that went wrong while the broker ran, always a `QueueError`: a handler's throw
   * arrives as a `HandlerError` whose `cause` is what the handler threw (see `reportedError`).
   */
  error: [error: QueueError, detail: Record<string, unknown>];
  warning: [message: string];
}

type State = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

/** Set by Broker's static block, which alone may read a broker's subscriptions; for `testHooksOf`. */
let subscriptionOf: (broker: Broker, queue: Queue<unknown>) => Subscription | undefined;
/** Set by Broker's static block too; for `scheduleTestHooksOf`. */
let schedulerOf: (broker: Broker) => Scheduler | undefined;
/** Set by Broker's static block too; for `retentionTestHooksOf`. */
let retainerOf: (broker: Broker) => Retainer | undefined;

/**
 * Publishes rows into queue tables and runs subscriptions over them.
 *
 * States: new → starting → running → stopping → stopped. `start()` opens the pool, checks the
 * server, prepares every statement and starts the claim loops; `stop()` is graceful and may be
 * called in any state (twice is harmless).
 */
export class Broker extends EventEmitter<BrokerEvents> {
  readonly #options: ResolvedBrokerOptions;
  readonly #subscriptions = new Map<string, Subscription>();
  #state: State = 'new';
  #driver: Driver | undefined;
  #publisher: Publisher | undefined;
  #listener: NotifyListener | undefined;
  #heartbeat: Heartbeat | undefined;
  #queueControls: QueueControls | undefined;
  #canceller: MessageCanceller | undefined;
  #stopping: Promise<void> | undefined;
  readonly #relays: Relay[] = [];
  readonly #dedupeGates: DedupeGate[] = [];
  readonly #schedules: ScheduleDeclaration[] = [];
  #scheduler: Scheduler | undefined;
  readonly #retentions: RetentionDeclaration[] = [];
  #retainer: Retainer | undefined;
  readonly #observability = new Observability({ poolStats: () => this.#driver?.stats() });
  /** What subscriptions report lifecycle events to: asked per event whether anyone listens. */
  readonly #lifecycleEvents: LifecycleEventSink = {
    listens: (name) => this.listenerCount(name) > 0,
    emit: (name, event) => {
      (this.emit as (name: keyof LifecycleEvents, event: unknown) => boolean)(name, event);
    },
  };

  constructor(options: BrokerOptions) {
    super();
    this.#options = resolveBrokerOptions(options);
  }

  get isRunning(): boolean {
    return this.#state === 'running';
  }

  /**
   * Reads a queue. Declare subscriptions before `start()`; one per queue per broker. With
   * `batch: n` the handler receives an array; with `onThreads` the handler is the export of a
   * module loaded on each worker thread and no handler is passed here.
   */
  subscribe<Output>(
    queue: Queue<unknown>,
    handler: Handler<Output>,
    options: SubscribeOptions<Output> & { decode: StandardSchemaV1<unknown, Output>; batch?: undefined },
  ): void;
  subscribe<Output>(
    queue: Queue<unknown>,
    handler: BatchHandler<Output>,
    options: SubscribeOptions<Output> & { decode: StandardSchemaV1<unknown, Output>; batch: number },
  ): void;
  subscribe<Payload>(
    queue: Queue<Payload>,
    handler: BatchHandler<Payload>,
    options: SubscribeOptions<Payload> & { batch: number },
  ): void;
  subscribe<Payload>(queue: Queue<Payload>, handler: Handler<Payload>, options?: SubscribeOptions<Payload>): void;
  subscribe<Payload>(queue: Queue<Payload>, options: SubscribeOptions<Payload> & { onThreads: ThreadOptions }): void;
  subscribe(
    queue: Queue<unknown>,
    handlerOrOptions: Handler<unknown> | BatchHandler<unknown> | SubscribeOptions<unknown>,
    maybeOptions: SubscribeOptions<unknown> = {},
  ): void {
    if (!(queue instanceof QueueClass)) {
      throw new DeclarationError('subscribe needs a queue: table.queue("name") of a table from defineTable');
    }
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
    if (this.#state !== 'new') {
      throw new DeclarationError(`subscribe to "${queue.label}": declare subscriptions before broker.start()`);
    }
    const key = subscriptionKey(queue.table.spec, queue.group);
    if (this.#subscriptions.has(key)) {
      throw new AlreadySubscribedError(
        `queue "${queue.label}" is already subscribed on this broker; scale it with { workers: n } instead of a second subscription`,
      );
    }
    const resolved = resolveSubscribeOptions(options, this.#options, `subscription "${queue.label}"`);
    const dedupe = createDedupeGate(options.dedupe, {
      consumer: queue.label,
      transactional: resolved.transactional,
      batch: resolved.batch,
      isOnThreads: resolved.onThreads !== undefined,
    });
    if (dedupe !== undefined) this.#dedupeGates.push(dedupe);
    const deduplicated = dedupe !== undefined && handler !== undefined ? dedupe.wrap(handler as Handler<unknown>) : handler;
    this.#subscriptions.set(key, new Subscription(queue, deduplicated, resolved));
  }

  /**
   * With `listen` on, the LISTEN session listens on every subscribed table before the first
   * claim; it is not taken from the pool and counts toward `connectionLimit`.
   */
  async start(): Promise<void> {
    if (this.#state === 'stopping' || this.#state === 'stopped') {
      throw new DeclarationError(
        'broker.start(): this broker has stopped (stop() was called, or start() failed) and does not start again; create a new Broker, with its subscriptions, to run again',
      );
    }
    if (this.#state !== 'new') {
      throw new DeclarationError(`broker.start() was already called (the broker is ${this.#state})`);
    }
    this.#state = 'starting';
    await this.#observability.start();
    const driver = createDriver(this.#options.database, {
      poolSize: this.#options.poolSize,
      acquireTimeoutMs: this.#options.acquireTimeoutMs,
    });
    this.#driver = driver;
    let listener: NotifyListener | undefined;
    try {
      await driver.open();
      const dialect = await openDialect(driver);
      const listen = this.#listenSupport(driver, dialect);
      if (listen !== undefined && this.#subscriptions.size + this.#relays.length > 0) {
        listener = new NotifyListener({
          ...listen,
          tables: [
            ...[...this.#subscriptions.values()].map((subscription) => subscription.queue.table.spec),
            ...this.#relays.map((relay) => relay.outbox.spec),
          ],
          wake: (spec, group) => this.#wake(spec, group),
          onError: (error, detail) => this.#reportError(error, detail),
          onWarning: (message) => this.#reportWarning(message),
          channels: new Map([
            [QUEUE_CONTROLS_CHANNEL, (payload: string | undefined) => this.#onQueueControl(payload)],
            [CANCELLATIONS_CHANNEL, (payload: string | undefined) => this.#onCancellationNotice(payload)],
          ]),
        });
      }
      checkConnectionLimit({
        limit: this.#options.connectionLimit,
        poolSize: driver.stats().size,
        subscriptions: [...this.#subscriptions.values()].flatMap((subscription) => subscription.threadBudget()),
        listenerConnections: listener === undefined ? 0 : 1,
      });
      this.#publisher = new Publisher({
        driver,
        dialect,
        wake: (spec, group) => this.#wake(spec, group),
        maxPayloadBytes: this.#options.maxPayloadBytes,
        notify: listen?.statements,
        onNotifyError: (error, detail) => this.#reportError(error, detail),
        dedupeWindowsTable: this.#options.dedupeWindowsTable,
      });
      const queueControls = new QueueControls({
        driver,
        database: dialect.name,
        table: this.#options.queueControlsTable,
        notify: dialect.notify,
      });
      this.#queueControls = queueControls;
      if (this.#subscriptions.size > 0) await this.#createQueueControlsTable(queueControls);
      const canceller = new MessageCanceller({
        driver,
        dialect,
        table: this.#options.cancellationsTable,
        notify: listen?.statements,
        onNotifyError: (error) => this.#reportError(error, { phase: 'cancel notification' }),
      });
      this.#canceller = canceller;
      const cancellations = this.#subscriptions.size > 0 ? await this.#createCancellationsTable(canceller) : undefined;
      // Subscriptions that give up on their handlers at the same stop share one cancel: one
      // session of its own, not one per subscription, cancels what runs on the broker's connections.
      let cancelling: Promise<void> | undefined;
      const cancelStatements = (): Promise<void> =>
        (cancelling ??= driver.cancelRunning().finally(() => (cancelling = undefined)));
      for (const subscription of this.#subscriptions.values()) {
        await subscription.open({
          driver,
          dialect,
          onError: (error, detail) => this.#reportError(error, detail),
          onWarning: (message) => this.#reportWarning(message),
          createContext: () => this.#handlerContext(driver),
          openThreads: (request) => this.#openThreads(request),
          cancelStatements,
          observability: this.#observability,
          events: this.#lifecycleEvents,
          readPaused: (queue) => queueControls.isPaused(queueControlKeyOf(queue, 'subscribe')),
          cancellations,
          rateLimitsTable: parseRateLimitsTable(this.#options.rateLimitsTable, dialect.name),
        });
      }
      for (const gate of this.#dedupeGates) await gate.open(driver, dialect);
      const publisher = this.#publisher!;
      for (const relay of this.#relays) {
        await relay.open({
          driver,
          dialect,
          publishManyWithin: (queue, items, transaction) =>
            this.#observability.publishMany(queue, items, (traced) => publisher.publishMany(queue, traced, { tx: transaction })),
          broker: this,
          onError: (error, detail) => this.#reportError(error, detail),
          onWarning: (message) => this.#reportWarning(message),
        });
      }
      // After the opens above, which found every table.
      await warnOfLooseTextCollations({
        driver,
        dialect,
        tables: [
          ...[...this.#subscriptions.values()].map((subscription) => subscription.queue.table.spec),
          ...this.#relays.map((relay) => relay.outbox.spec),
        ],
        onWarning: (message) => this.#reportWarning(message),
      });
      await listener?.open();
      this.#listener = listener;
      if (this.#scheduler !== undefined) {
        const observability = this.#observability;
        await this.#scheduler.open({
          driver,
          dialect,
          table: this.#options.schedulesTable,
          publishManyWithin: (queue, items, transaction) =>
            observability.publishMany(queue, items, (traced) => publisher.publishMany(queue, traced, { tx: transaction })),
          onError: (error, detail) => this.#reportError(error, detail),
          onWarning: (message) => this.#reportWarning(message),
          onCounted: (schedule, counts) => observability.scheduleCounted(schedule, counts),
        });
      }
      await this.#retainer?.open({
        driver,
        dialect,
        onError: (error, detail) => this.#reportError(error, detail),
        onPruned: (table, kind, rowCount) => this.#observability.pruned(table, kind, rowCount),
      });
      const heartbeat = this.#options.heartbeat;
      if (heartbeat !== undefined) {
        this.#heartbeat = await Heartbeat.start({
          driver,
          database: dialect.name,
          options: heartbeat,
          subscriptions: () =>
            [...this.#subscriptions.values()].map((subscription) => ({ ...subscription.stats(), deadLetter: subscription.deadLetter ?? null })),
          onError: (error, detail) => this.#reportError(error, detail),
        });
      }
    } catch (error) {
      this.#state = 'stopped';
      await Promise.allSettled([
        ...[...this.#subscriptions.values()].map((subscription) => subscription.stop(0)),
        ...this.#relays.map((relay) => relay.stop(0)),
      ]);
      await listener?.close();
      await driver.close().catch(() => undefined);
      throw error;
    }
    this.#state = 'running';
    for (const subscription of this.#subscriptions.values()) subscription.start();
    for (const relay of this.#relays) relay.start();
    this.#scheduler?.start();
    this.#retainer?.start();
  }

  /**
   * Stops claims, lets handlers in work finish (up to `timeoutMs`, then aborts their signal),
   * hands back rows waiting in subscriptions, ends the LISTEN session, and closes the pool when
   * the broker opened it.
   */
  stop(options: { timeoutMs?: number } = {}): Promise<void> {
    if (options.timeoutMs !== undefined) {
      try {
        millisecondsFromZero(options.timeoutMs, 'timeoutMs', 'broker.stop');
      } catch (error) {
        return Promise.reject(error);
      }
    }
    if (this.#state === 'new') {
      this.#state = 'stopped';
      this.#stopping = this.#observability.close();
    }
    this.#stopping ??= this.#stop(options.timeoutMs ?? this.#options.stopTimeoutMs);
    return this.#stopping;
  }

  /**
   * Writes one row with a dedupe key, unless another row holds the key: says which happened
   * (`published`, `duplicate`, or `replaced` with `dedupe: 'replace'`) and the row's id. First of
   * the two, so options held in a variable that has a `dedupeKey` get this answer's type.
   */
  async publish<Payload>(queue: Queue<Payload>, payload: Payload, options: KeyedPublishOptions): Promise<KeyedPublishResult>;
  /** Writes one row and returns its id. */
  async publish<Payload>(queue: Queue<Payload>, payload: Payload, options?: PublishOptions): Promise<string>;
  async publish<Payload>(
    queue: Queue<Payload>,
    payload: Payload,
    options?: PublishOptions | KeyedPublishOptions,
  ): Promise<string | KeyedPublishResult> {
    const publisher = this.#requirePublisher();
    if (options !== undefined && options !== null && 'dedupeKey' in options && options.dedupeKey !== undefined) {
      return this.#observability.publish(queue, options, (traced) => publisher.publishKeyed(queue, payload, traced ?? options));
    }
    return this.#observability.publish(queue, options, (traced) => publisher.publish(queue, payload, traced));
  }

  /** Writes many rows with one multi-row insert per chunk; returns how many were written. */
  async publishMany<Payload>(
    queue: Queue<Payload>,
    items: readonly PublishItem<Payload>[],
    options?: { tx?: unknown },
  ): Promise<number> {
    const publisher = this.#requirePublisher();
    return this.#observability.publishMany(queue, items, (traced) => publisher.publishMany(queue, traced, options));
  }

  /**
   * The broker's metrics in the Prometheus text format 0.0.4 (see README, "Metrics and
   * tracing"). Counts run from construction and stay readable after `stop()`.
   */
  metrics(): string {
    return this.#observability.metrics();
  }

  /** Serves `metrics()` at `GET /metrics` on `host:port` until the handle closes or `stop()`. */
  serveMetrics(options: ServeMetricsOptions): Promise<MetricsEndpoint> {
    return this.#observability.serveMetrics(options);
  }

  /**
   * Writes records into an outbox table on the service's own transaction:
   * `broker.outbox(table).write(tx, name, payload, headers)`, once the broker is started. A write
   * wakes this broker's relays of the table (see docs/outbox.md for when that is).
   */
  outbox(table: OutboxTable): Outbox {
    return new Outbox(table, {
      publisher: () => this.#requirePublisher(),
      onUnseenCommit: (written) => {
        for (const relay of this.#relays) {
          if (relay.outbox.spec.qualifiedName === written.spec.qualifiedName) relay.wakeAfterUnseenCommit();
        }
      },
    });
  }

  /**
   * Relays an outbox table to a destination while the broker runs: started by `start()`, drained
   * by `stop()`. Declare relays before `start()`; any number of replicas may relay one table.
   */
  relay(outbox: OutboxTable | Outbox, destination: OutboxDestination, options: RelayOptions = {}): Relay {
    const table = outbox instanceof Outbox ? outbox.table : outbox;
    if (this.#state !== 'new') {
      throw new DeclarationError(`relay of outbox "${table.label}": declare relays before broker.start()`);
    }
    if (destination === null || typeof destination !== 'object' || typeof destination.send !== 'function') {
      throw new DeclarationError(`relay of outbox "${table.label}": the destination must be an OutboxDestination (queueDestination(queue), …)`);
    }
    if (this.#relays.some((relay) => relay.outbox.spec.qualifiedName === table.spec.qualifiedName)) {
      // Relays of one table share its records: two destinations would each get only some of them.
      throw new AlreadySubscribedError(
        `outbox "${table.label}" is already relayed by this broker; one relay per outbox table, scaled with { concurrency: n }`,
      );
    }
    const resolved = resolveRelayOptions(options, this.#options, `relay of outbox "${table.label}"`);
    const relay = new Relay(table, destination, resolved);
    this.#relays.push(relay);
    return relay;
  }

  /**
   * Fires a message into `queue` at every tick of `options.cron`, exactly once per tick across
   * every broker that declares the schedule (see README, "Recurring schedules"). Declare
   * schedules before `start()`; the queue's table needs a headers column, since each message
   * carries its tick's instant in the `tablequeue-scheduled-at` header (`SCHEDULED_AT_HEADER`).
   */
  schedule<Payload>(name: string, queue: Queue<Payload>, options: ScheduleOptions<Payload>): void {
    if (!(queue instanceof QueueClass)) {
      throw new DeclarationError(`schedule ${JSON.stringify(name)} needs a queue: table.queue("name") of a table from defineTable`);
    }
    if (this.#state !== 'new') {
      throw new DeclarationError(`schedule ${JSON.stringify(name)}: declare schedules before broker.start()`);
    }
    const declaration = resolveScheduleDeclaration(name, queue as Queue<unknown>, options, { maxPayloadBytes: this.#options.maxPayloadBytes });
    if (this.#schedules.some((declared) => declared.name === declaration.name)) {
      throw new DeclarationError(`schedule "${declaration.name}" is already declared on this broker; give each schedule its own name`);
    }
    this.#schedules.push(declaration);
    this.#scheduler = new Scheduler(this.#schedules);
  }

  /**
   * Pauses a queue (`table.queue(name)`) or every queue of a table (the table itself) for every
   * broker that reads it: no subscription claims its rows once it has read the pause, within one
   * poll interval (at once where LISTEN is on); rows in work finish and settle, and publishing
   * goes on. The state lives in the queue controls table (broker option `queueControlsTable`),
   * created here if missing; it lasts until `resume`, across restarts.
   */
  async pause(target: Queue<unknown> | QueueTable): Promise<void> {
    await this.#control(target, 'pause');
  }

  /** Undoes `pause` of the same queue or table; every broker claims again within one poll interval (at once with LISTEN). */
  async resume(target: Queue<unknown> | QueueTable): Promise<void> {
    await this.#control(target, 'resume');
  }

  /**
   * Cancels the message `id` of `queue`, in whichever broker or process runs it. A waiting message
   * is removed (deleted, or marked processed where the table has processedAt) before any handler
   * sees it: `waiting`. A message in work has its handler's `context.signal` aborted with a
   * `CancelledError` and is settled as cancelled whatever the handler returns, never retried:
   * `inWork` (lease tables: the row is removed at once, and its broker hears at its next lease
   * renewal; row lock tables: the broker running it reads the cancel within one poll interval).
   * `gone`: no unfinished message with that id in the queue. Lease and row lock tables only.
   */
  async cancel(queue: Queue<unknown>, id: string): Promise<CancelResult> {
    if (!(queue instanceof QueueClass) || typeof id !== 'string' || id === '') {
      throw new DeclarationError("broker.cancel needs a queue from table.queue(name) and a message id as text, such as broker.cancel(emails, '42')");
    }
    if (this.#state !== 'running' || this.#canceller === undefined) {
      throw new ClosedError(
        this.#state === 'new' || this.#state === 'starting'
          ? 'broker.cancel: the broker is not started; await broker.start() first'
          : 'broker.cancel: the broker is stopped',
      );
    }
    const result = await this.#canceller.cancel(queue, id);
    // This broker's own delivery of it, if any, hears now rather than at its next renewal or poll.
    if (result.status === 'inWork') this.#subscriptions.get(subscriptionKey(queue.table.spec, queue.group))?.cancelInWork(id);
    return result;
  }

  /** Whether the queue is paused now, by its own row or its table's (read from the database, not a cache). */
  async isPaused(queue: Queue<unknown>): Promise<boolean> {
    const key = queueControlKeyOf(queue, 'broker.isPaused');
    return this.#requireQueueControls('broker.isPaused').isPaused(key);
  }

  /**
   * Deletes the table's processed rows and dead letters once they are older than the ages given,
   * in batches by primary key that skip locked rows, with a pause between them, so claims never
   * wait behind it (see README, "Retention"). One replica at a time prunes a table: a run takes
   * the table's lease in the maintenance table first, and a replica that finds it held skips the
   * run. Declare retention before `start()`; the first run is at start, then every `intervalMs`.
   */
  retain(table: QueueTableClass, options: RetainOptions): void {
    if (!(table instanceof QueueTableClass)) {
      throw new DeclarationError('broker.retain needs a table from defineTable, such as broker.retain(jobs, { processedForMs: 7 * 86_400_000 })');
    }
    if (this.#state !== 'new') {
      throw new DeclarationError(`broker.retain(${table.spec.qualifiedName}): declare retention before broker.start()`);
    }
    const declaration = resolveRetentionDeclaration(table, options);
    if (this.#retentions.some((declared) => declared.table.spec.qualifiedName === table.spec.qualifiedName)) {
      throw new DeclarationError(
        `broker.retain(${table.spec.qualifiedName}) is already declared on this broker; give one retain call both ages (processedForMs and deadLettersForMs)`,
      );
    }
    this.#retentions.push(declaration);
    this.#retainer = new Retainer(this.#retentions);
  }

  stats(): BrokerStats {
    return {
      pool: this.#driver?.stats() ?? { size: 0, held: 0, idle: 0, spare: 0, maxHeld: 0, reservedForRenewals: 0 },
      subscriptions: [...this.#subscriptions.values()].map((subscription) => subscription.stats()),
      listener: this.#listener?.stats(),
      relays: this.#relays.map((relay) => relay.stats()),
      schedules: this.#scheduler?.stats() ?? [],
      retention: this.#retainer?.stats() ?? [],
    };
  }

  async #stop(timeoutMs: number): Promise<void> {
    this.#state = 'stopping';
    await Promise.allSettled([
      this.#scheduler?.stop(),
      this.#retainer?.stop(),
      this.#listener?.close(),
      ...[...this.#subscriptions.values()].map((subscription) => subscription.stop(timeoutMs)),
      ...this.#relays.map((relay) => relay.stop(timeoutMs)),
    ]);
    await this.#heartbeat?.stop();
    await this.#closeDriver();
    await this.#observability.close();
    this.#state = 'stopped';
  }

  /**
   * Cancels what still runs on the broker's connections (a relay's statement, a publish, a handler
   * that outlived the stop timeout), then closes the pool within POOL_CLOSE_TIMEOUT_MS: a pool
   * that does not close in time is reported and left behind rather than holding `stop()` forever.
   */
  async #closeDriver(): Promise<void> {
    const driver = this.#driver;
    if (driver === undefined) return;
    await driver.cancelRunning().catch((error: unknown) => this.#reportError(error, { phase: 'stop' }));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timed out'>((resolve) => {
      timer = setTimeout(() => resolve('timed out'), POOL_CLOSE_TIMEOUT_MS);
    });
    try {
      const closed = await Promise.race([driver.close().then(() => 'closed' as const), timedOut]);
      if (closed === 'timed out') {
        const message = `the pool of ${driver.description} did not close within ${POOL_CLOSE_TIMEOUT_MS} ms; stop() went on without it`;
        this.#reportError(new ClosedError(message), { phase: 'close' });
      }
    } catch (error) {
      this.#reportError(error, { phase: 'close' });
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Whether `listen` is on, and what it needs: on by default for a pool opened from a URL on a
   * database with LISTEN/NOTIFY, on for the service's pool only when asked. `listen: true`
   * elsewhere is refused, since it would silently change nothing.
   */
  #listenSupport(driver: Driver, dialect: Dialect): ListenSupport | undefined {
    const { listen, database } = this.#options;
    const isOn = listen ?? (typeof database === 'string' && dialect.capabilities.supportsListenNotify);
    if (!isOn) return undefined;
    const openSession = driver.openNotificationClient?.bind(driver);
    if (dialect.notify === undefined || openSession === undefined) {
      throw new UnsupportedError({
        database: dialect.name,
        feature: 'listen',
        message:
          `listen: true is PostgreSQL-only (LISTEN/NOTIFY) and the database is ${driver.description}; remove the option: ` +
          'rows that other processes publish are found by polling every pollIntervalMs',
      });
    }
    return { statements: dialect.notify, openSession };
  }

  async #control(target: Queue<unknown> | QueueTable, action: 'pause' | 'resume'): Promise<void> {
    const key = queueControlKeyOf(target, `broker.${action}`);
    const controls = this.#requireQueueControls(`broker.${action}`);
    await (action === 'pause' ? controls.pause(key) : controls.resume(key));
    // This broker's own subscriptions need no notification.
    this.#refreshPaused(key);
  }

  #requireQueueControls(what: string): QueueControls {
    if (this.#state !== 'running' || this.#queueControls === undefined) {
      throw new ClosedError(
        this.#state === 'new' || this.#state === 'starting'
          ? `${what}: the broker is not started; await broker.start() first`
          : `${what}: the broker is stopped`,
      );
    }
    return this.#queueControls;
  }

  /**
   * A broker that may not create tables still runs: its subscriptions take their queues to run
   * until the table exists (each warns once that it cannot read it).
   */
  async #createQueueControlsTable(controls: QueueControls): Promise<void> {
    try {
      await controls.createTable();
    } catch (error) {
      this.#reportWarning(
        `${error instanceof Error ? error.message : String(error)}; until it exists, subscriptions take their queues to run and pause() fails`,
      );
    }
  }

  /**
   * Without the table (a role that may not create one), cancels still remove waiting messages
   * once someone creates it, but none reaches a message this broker has in work.
   */
  async #createCancellationsTable(canceller: MessageCanceller): Promise<CancellationRecords | undefined> {
    try {
      await canceller.createTable();
      return canceller.records;
    } catch (error) {
      this.#reportWarning(
        `${error instanceof Error ? error.message : String(error)}; cancels of messages this broker has in work will not reach it (create the cancellations table, or name one it may create with the cancellationsTable option)`,
      );
      return undefined;
    }
  }

  /** A notification on the controls channel: the queue it names, or every queue after a reconnect. */
  /**
   * A cancel of a message in work, announced by the canceller after its record committed: the
   * subscription of that table that runs the row tells its handler. A notice lost in a reconnect
   * is read from the records at the next poll.
   */
  #onCancellationNotice(payload: string | undefined): void {
    const notice = payload === undefined ? undefined : parseCancellationNotice(payload);
    if (notice === undefined) return;
    for (const subscription of this.#subscriptions.values()) {
      if (subscription.queue.table.spec.qualifiedName === notice.queueTable) subscription.cancelInWork(notice.id);
    }
  }

  #onQueueControl(payload: string | undefined): void {
    if (payload === undefined) {
      for (const subscription of this.#subscriptions.values()) subscription.refreshPaused();
      return;
    }
    const key = parseQueueControlPayload(payload);
    if (key !== undefined) this.#refreshPaused(key);
  }

  #refreshPaused(key: QueueControlKey): void {
    for (const subscription of this.#subscriptions.values()) {
      const queue = subscription.queue;
      if (queue.table.spec.qualifiedName !== key.queueTable) continue;
      if (key.queueName === '' || queue.group === key.queueName) subscription.refreshPaused();
    }
  }

  #requirePublisher(): Publisher {
    if (this.#state !== 'running' || !this.#publisher) {
      throw new ClosedError(
        this.#state === 'new' || this.#state === 'starting'
          ? 'the broker is not started; await broker.start() before publishing'
          : 'the broker is stopped; it publishes no more',
      );
    }
    return this.#publisher;
  }

  #openThreads(request: ThreadRequest): Promise<ThreadInvoker> {
    const database = this.#options.database;
    if (typeof database !== 'string') {
      throw new DeclarationError(
        `subscription "${request.subscription}": onThreads needs the broker's database as a URL, since each thread opens its own pool`,
      );
    }
    return ThreadHost.start({
      request,
      database,
      publish: (queue, payload, options) => this.publish(queue, payload, options),
    });
  }

  #wake(spec: TableSpec, group: string | undefined): void {
    for (const relay of this.#relays) {
      if (relay.outbox.spec.qualifiedName === spec.qualifiedName) relay.wake();
    }
    for (const subscription of this.#subscriptions.values()) {
      const queue = subscription.queue;
      if (queue.table.spec.qualifiedName !== spec.qualifiedName) continue;
      if (group === undefined || queue.group === undefined || queue.group === group) subscription.wake();
    }
  }

  #handlerContext(driver: Driver): Omit<HandlerContext, 'signal'> {
    return {
      query: async <Row>(sql: string, params: readonly unknown[] = []) =>
        (await driver.execute({ name: 'context.query', sql, values: params })).rows as Row[],
      publish: (queue, payload, options) => this.publish(queue, payload, options),
    };
  }

  #reportError(error: unknown, detail: Record<string, unknown>): void {
    if (this.listenerCount('error') > 0) {
      this.emit('error', reportedError(error, detail), detail);
      return;
    }
    this.#options.logger.error(errorLogLine(error, detail), { ...detail, error });
  }

  #reportWarning(message: string): void {
    if (this.listenerCount('warning') > 0) this.emit('warning', message);
    else this.#options.logger.warn(message);
  }

  static {
    subscriptionOf = (broker, queue) => broker.#subscriptions.get(subscriptionKey(queue.table.spec, queue.group));
    schedulerOf = (broker) => broker.#scheduler;
    retainerOf = (broker) => broker.#retainer;
  }
}

/**
 * For tests, and not exported from the package: the test signals and clock of the subscription of
 * `queue` on `broker` (see subscription/subscription-test-hooks.ts). Turn signals on and set the
 * clock after `subscribe()` and before `start()`.
 */
export function testHooksOf(broker: Broker, queue: Queue<unknown>): SubscriptionTestHooks {
  const subscription = subscriptionOf(broker, queue);
  if (subscription === undefined) throw new Error(`this broker has no subscription of "${queue.label}"`);
  return subscription.testHooks;
}

/**
 * For tests, and not exported from the package: the clock and test signals of the broker's
 * schedules (see schedule/scheduler.ts). Set the clock after the last `schedule()` and before `start()`.
 */
export function scheduleTestHooksOf(broker: Broker): SchedulerTestHooks {
  const scheduler = schedulerOf(broker);
  if (scheduler === undefined) throw new Error('this broker has no schedules');
  return scheduler.testHooks;
}

function subscriptionKey(spec: TableSpec, group: string | undefined): string {
  return group === undefined ? spec.qualifiedName : `${spec.qualifiedName}\u0000${group}`;
}

/**
 * What a test reaches in a broker's retention (not exported by the package): a signal per run
 * and per batch. Declare with `retain()` first.
 */
export function retentionTestHooksOf(broker: Broker): RetainerTestHooks {
  const retainer = retainerOf(broker);
  if (retainer === undefined) throw new Error('this broker retains no table');
  return retainer.testHooks;
}
