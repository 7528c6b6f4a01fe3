import { EventEmitter } from 'node:events';
import { requireQueue, type Queue, type QueueTable } from '../definition/define-table.js';
import { parseRateLimitsTable } from '../dialect/rate-limit-statements.js';
import type { Driver, PoolStats } from '../driver/driver.js';
import { createDriver } from '../driver/create-driver.js';
import { ClosedError, DeclarationError, type QueueError } from '../errors.js';
import type { KeyedPublishOptions, KeyedPublishResult, PublishItem, PublishOptions } from '../publish/publish-options.js';
import { subscribeByName, type ByNameSubscribeOptions } from '../routing/by-name-subscription.js';
import type { RouteMap } from '../routing/define-routes.js';
import { RouteTable } from '../routing/route-table.js';
import { Router, type RouterTarget } from '../routing/router.js';
import { Publisher } from '../publish/publisher.js';
import { millisecondsFromZero } from '../option-checks.js';
import type { StandardSchemaV1 } from '../delivery/standard-schema.js';
import type { Subscription, SubscriptionStats } from '../subscription/subscription.js';
import { checkConnectionLimit } from '../threads/thread-pool-budget.js';
import type { BatchHandler, Handler, ThreadOptions, SubscribeOptions } from '../subscription/subscription-options.js';
import type { SubscriptionTestHooks } from '../subscription/subscription-test-hooks.js';
import type { LifecycleEvents, LifecycleEventSink } from '../subscription/lifecycle-events.js';
import type { TableSpec } from '../table/table-spec.js';
import { resolveBrokerOptions, type BrokerOptions, type ResolvedBrokerOptions } from './broker-options.js';
import { errorLogLine } from './error-log-line.js';
import { Heartbeat } from './heartbeat.js';
import { reportedError } from './reported-error.js';
import { NotifyListener, type ListenerStats } from './notify-listener.js';
import { QUEUE_CONTROLS_CHANNEL, queueControlKeyOf } from './queue-controls.js';
import type { BrokerState } from './broker-lifecycle.js';
import { BrokerQueueControls } from './broker-queue-controls.js';
import { BrokerCancellation } from './broker-cancellation.js';
import { BrokerSchedules } from './broker-schedules.js';
import { BrokerRetention } from './broker-retention.js';
import { closeBrokerPool } from './broker-pool-close.js';
import { listenSupportOf } from './broker-listen.js';
import { checkGalera } from './broker-galera.js';
import { checkPooler } from './broker-pooler.js';
import { openControlRead, type BrokerControlRead, type ControlReadTestHooks } from './broker-control-read.js';
import type { MetricsEndpoint, ServeMetricsOptions } from '../observability/metrics-endpoint.js';
import { Observability } from '../observability/observability.js';
import { openDialect } from './open-dialect.js';
import { warnOfUnindexedRowsInWork } from './in-work-index-check.js';
import { warnOfLooseTextCollations } from './text-collation-check.js';
import type { DedupeGate } from '../outbox/dedupe.js';
import type { OutboxTable } from '../outbox/define-outbox.js';
import type { OutboxDestination } from '../outbox/destination.js';
import { Outbox } from '../outbox/outbox.js';
import type { Relay } from '../outbox/relay.js';
import type { RelayStats } from '../outbox/relay-runtime.js';
import type { RelayOptions } from '../outbox/relay-options.js';
import { declareRelay, openRelays } from './broker-relays.js';
import { declareSubscription, openSubscriptions, subscriptionKey } from './broker-subscriptions.js';
import type { ScheduleOptions } from '../schedule/schedule-options.js';
import type { Scheduler, ScheduleStats, SchedulerTestHooks } from '../schedule/scheduler.js';
import type { QueueTable as QueueTableClass } from '../definition/define-table.js';
import type { RetainOptions } from '../retention/retention-options.js';
import type { Retainer, RetainerTestHooks, RetentionStats } from '../retention/retainer.js';
import { CANCELLATIONS_CHANNEL, type CancelResult } from './message-cancel.js';
import type { AsyncApiDocument } from '../asyncapi/asyncapi-document.js';
import { describeBroker, type AsyncApiOptions } from '../asyncapi/describe-broker.js';

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

/** Set by Broker's static block, which alone may read a broker's subscriptions; for `testHooksOf`. */
let subscriptionOf: (broker: Broker, queue: Queue<unknown>) => Subscription | undefined;
/** Set by Broker's static block too; for `scheduleTestHooksOf`. */
let schedulerOf: (broker: Broker) => Scheduler | undefined;
/** Set by Broker's static block too; for `retentionTestHooksOf`. */
let retainerOf: (broker: Broker) => Retainer | undefined;
/** Set by Broker's static block too; for `controlReadTestHooksOf`. */
let controlReadOf: (broker: Broker) => BrokerControlRead | undefined;

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
  #state: BrokerState = 'new';
  #driver: Driver | undefined;
  #publisher: Publisher | undefined;
  #listener: NotifyListener | undefined;
  #heartbeat: Heartbeat | undefined;
  readonly #queueControls = new BrokerQueueControls({
    state: () => this.#state,
    subscriptions: () => this.#subscriptions.values(),
    onWarning: (message) => this.#reportWarning(message),
  });
  readonly #cancellation = new BrokerCancellation({
    state: () => this.#state,
    subscriptions: () => this.#subscriptions.values(),
    onWarning: (message) => this.#reportWarning(message),
  });
  #stopping: Promise<void> | undefined;
  readonly #relays: Relay[] = [];
  readonly #dedupeGates: DedupeGate[] = [];
  readonly #schedules = new BrokerSchedules();
  readonly #retention = new BrokerRetention();
  /** Where both tables exist: the one read per poll interval of pauses and cancels for every subscription. */
  #controlRead: BrokerControlRead | undefined;
  readonly #observability = new Observability({ poolStats: () => this.#driver?.stats() });
  /** Message names to queues, for `publishTo` and `subscribeTo`. */
  readonly #routes = new RouteTable();
  /** Where by-name publishes and subscriptions go: this broker's own publish and subscribe. */
  readonly #routeTarget: RouterTarget = {
    publish: (queue, payload, options) => this.publish(queue, payload, options as PublishOptions),
    subscribe: (queue, handlerOrOptions, options) =>
      this.subscribe(queue, handlerOrOptions as Handler<unknown>, options as SubscribeOptions<unknown> | undefined),
  };
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
    declareSubscription(queue, handlerOrOptions, maybeOptions, {
      state: this.#state,
      options: this.#options,
      subscriptions: this.#subscriptions,
      dedupeGates: this.#dedupeGates,
    });
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
      pooler: this.#options.pooler,
    });
    this.#driver = driver;
    let listener: NotifyListener | undefined;
    try {
      await driver.open();
      const dialect = await openDialect(driver, this.#options.dialect);
      const tables = [
        ...[...this.#subscriptions.values()].map((subscription) => subscription.queue.table.spec),
        ...this.#relays.map((relay) => relay.outbox.spec),
      ];
      checkPooler(this.#options, driver, tables);
      checkGalera(this.#options, driver, tables);
      const listen = listenSupportOf(this.#options, driver, dialect);
      if (listen !== undefined && this.#subscriptions.size + this.#relays.length > 0) {
        listener = new NotifyListener({
          ...listen,
          tables,
          wake: (spec, group) => this.#wake(spec, group),
          onError: (error, detail) => this.#reportError(error, detail),
          onWarning: (message) => this.#reportWarning(message),
          channels: new Map([
            [QUEUE_CONTROLS_CHANNEL, (payload: string | undefined) => this.#queueControls.onNotification(payload)],
            [CANCELLATIONS_CHANNEL, (payload: string | undefined) => this.#cancellation.onNotice(payload)],
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
      const queueControls = this.#queueControls.open({
        driver,
        database: dialect.name,
        table: this.#options.queueControlsTable,
        notify: dialect.notify,
      });
      if (this.#subscriptions.size > 0) await this.#queueControls.createTable();
      this.#cancellation.open({
        driver,
        dialect,
        table: this.#options.cancellationsTable,
        notify: listen?.statements,
        onNotifyError: (error) => this.#reportError(error, { phase: 'cancel notification' }),
      });
      const cancellations = this.#subscriptions.size > 0 ? await this.#cancellation.createTable() : undefined;
      const controlRead = openControlRead({
        driver,
        database: dialect.name,
        queueControlsTable: this.#options.queueControlsTable,
        hasQueueControlsTable: this.#queueControls.isTableCreated,
        cancellations,
        subscriptions: [...this.#subscriptions.values()],
        onError: (error, detail) => this.#reportError(error, detail),
      });
      this.#controlRead = controlRead;
      await openSubscriptions(this.#subscriptions.values(), {
        driver,
        dialect,
        onError: (error, detail) => this.#reportError(error, detail),
        onWarning: (message) => this.#reportWarning(message),
        database: this.#options.database,
        pooler: this.#options.pooler,
        publish: (queue, payload, options) => this.publish(queue, payload, options),
        observability: this.#observability,
        events: this.#lifecycleEvents,
        readPaused: (queue, refreshedAt) =>
          controlRead?.readPaused(queue, refreshedAt) ?? queueControls.isPaused(queueControlKeyOf(queue, 'subscribe')),
        cancellations,
        readsCancellationsForIt: controlRead !== undefined,
        rateLimitsTable: parseRateLimitsTable(this.#options.rateLimitsTable, dialect.name),
      });
      for (const gate of this.#dedupeGates) await gate.open(driver, dialect);
      const publisher = this.#publisher!;
      await openRelays(this.#relays, {
        driver,
        dialect,
        publishManyWithin: (queue, items, transaction) =>
          this.#observability.publishMany(queue, items, (traced) => publisher.publishMany(queue, traced, { tx: transaction })),
        broker: this,
        onError: (error, detail) => this.#reportError(error, detail),
        onWarning: (message) => this.#reportWarning(message),
      });
      for (const relay of this.#relays) this.#observability.forRelay(() => relay.stats());
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
      await warnOfUnindexedRowsInWork({
        driver,
        dialect,
        counters: [...this.#subscriptions.values()].flatMap((subscription) => {
          const reason = subscription.countsRowsInWork;
          return reason === undefined ? [] : [{ subscription: subscription.name, spec: subscription.queue.table.spec, reason }];
        }),
        onWarning: (message) => this.#reportWarning(message),
      });
      await listener?.open();
      this.#listener = listener;
      await this.#schedules.open({
        driver,
        dialect,
        table: this.#options.schedulesTable,
        publishManyWithin: (queue, items, transaction) =>
          this.#observability.publishMany(queue, items, (traced) => publisher.publishMany(queue, traced, { tx: transaction })),
        onError: (error, detail) => this.#reportError(error, detail),
        onWarning: (message) => this.#reportWarning(message),
        observability: this.#observability,
      });
      await this.#retention.open({
        driver,
        dialect,
        dedupeWindowsTable: this.#options.dedupeWindowsTable,
        onError: (error, detail) => this.#reportError(error, detail),
        observability: this.#observability,
      });
      const heartbeat = this.#options.heartbeat;
      if (heartbeat !== undefined) {
        this.#heartbeat = await Heartbeat.start({
          driver,
          database: dialect.name,
          options: heartbeat,
          subscriptions: () =>
            [...this.#subscriptions.values()].map((subscription) => ({
              ...subscription.stats(),
              deadLetter: subscription.deadLetter ?? null,
              countsRowsInWork: subscription.countsRowsInWork ?? null,
            })),
          relays: () => this.#relays.map((relay) => relay.stats()),
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
    this.#controlRead?.start();
    this.#schedules.start();
    this.#retention.start();
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
    requireQueue(queue, 'publish');
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
    requireQueue(queue, 'publishMany');
    const publisher = this.#requirePublisher();
    return this.#observability.publishMany(queue, items, (traced) => publisher.publishMany(queue, traced, options));
  }

  /**
   * Routes the message name `name` to `queue` for `publishTo` and `subscribeTo` (see README,
   * "Routes"). A name ending in `*` is a prefix: `'mail.*'` takes every name that starts with
   * `'mail.'`. A name resolves to its exact route first, then to the longest prefix that starts it.
   * The same name to another queue is a DeclarationError.
   */
  route(name: string, queue: Queue<unknown>): void {
    this.#routes.declare(name, queue, 'broker.route');
  }

  /**
   * Declares every route of a table from `defineRoutes` and returns a router whose `publishTo`
   * and `subscribeTo` check each payload and handler against the queue the name routes to.
   */
  routes<Routes extends RouteMap>(routes: Routes): Router<Routes> {
    const router = new Router(routes, this.#routeTarget);
    this.#routes.declareAll(Object.entries(routes), 'broker.routes');
    return router;
  }

  /** `publish` with a dedupe key, into the queue `name` routes to. */
  publishTo(name: string, payload: unknown, options: KeyedPublishOptions): Promise<KeyedPublishResult>;
  /** `publish` into the queue `name` routes to: the row's id, or a NoRouteError naming the closest routes. */
  publishTo(name: string, payload: unknown, options?: PublishOptions): Promise<string>;
  async publishTo(name: string, payload: unknown, options?: PublishOptions | KeyedPublishOptions): Promise<string | KeyedPublishResult> {
    return this.#routeTarget.publish(this.#routes.resolve(name, 'broker.publishTo'), payload, options);
  }

  /** As below, with `batch: n`: the handler receives an array. */
  subscribeTo<Payload = unknown>(
    name: string,
    handler: BatchHandler<Payload>,
    options: ByNameSubscribeOptions<Payload> & { batch: number },
  ): void;
  /**
   * Reads the queue `name` routes to with the broker's poll interval and lease: every message
   * routed there, whatever name it was published under. Refuses maxAttempts and deadLetter,
   * which belong to the queue (subscribe to it for those); a NoRouteError when no route takes the name.
   */
  subscribeTo<Payload = unknown>(name: string, handler: Handler<Payload>, options?: ByNameSubscribeOptions<Payload>): void;
  subscribeTo(name: string, handler: unknown, options?: unknown): void {
    const queue = this.#routes.resolve(name, 'broker.subscribeTo');
    subscribeByName(this.#routeTarget.subscribe, { name, queue, handlerOrOptions: handler, options, where: 'broker.subscribeTo' });
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
      destinationsOf: (written) =>
        this.#relays.filter((relay) => relay.outbox.spec.qualifiedName === written.spec.qualifiedName).map((relay) => relay.destination),
    });
  }

  /**
   * Relays an outbox table to a destination while the broker runs: started by `start()`, drained
   * by `stop()`. Declare relays before `start()`; any number of replicas may relay one table.
   */
  relay(outbox: OutboxTable | Outbox, destination: OutboxDestination, options: RelayOptions = {}): Relay {
    return declareRelay(this.#relays, { outbox, destination, options }, { state: this.#state, options: this.#options });
  }

  /**
   * Fires a message into `queue` at every tick of `options.cron`, exactly once per tick across
   * every broker that declares the schedule (see README, "Recurring schedules"). Declare
   * schedules before `start()`; the queue's table needs a headers column, since each message
   * carries its tick's instant in the `tablequeue-scheduled-at` header (`SCHEDULED_AT_HEADER`).
   */
  schedule<Payload>(name: string, queue: Queue<Payload>, options: ScheduleOptions<Payload>): void {
    this.#schedules.declare(name, queue, options, { state: this.#state, maxPayloadBytes: this.#options.maxPayloadBytes });
  }

  /**
   * Pauses a queue (`table.queue(name)`) or every queue of a table (the table itself) for every
   * broker that reads it: no subscription claims its rows once it has read the pause, within one
   * poll interval (at once where LISTEN is on); rows in work finish and settle, and publishing
   * goes on. The state lives in the queue controls table (broker option `queueControlsTable`),
   * created here if missing; it lasts until `resume`, across restarts.
   */
  async pause(target: Queue<unknown> | QueueTable): Promise<void> {
    await this.#queueControls.control(target, 'pause');
  }

  /** Undoes `pause` of the same queue or table; every broker claims again within one poll interval (at once with LISTEN). */
  async resume(target: Queue<unknown> | QueueTable): Promise<void> {
    await this.#queueControls.control(target, 'resume');
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
    return this.#cancellation.cancel(queue, id);
  }

  /** Whether the queue is paused now, by its own row or its table's (read from the database, not a cache). */
  async isPaused(queue: Queue<unknown>): Promise<boolean> {
    return this.#queueControls.isPaused(queue);
  }

  /**
   * Deletes the table's processed rows and dead letters once they are older than the ages given,
   * in batches by primary key that skip locked rows, with a pause between them, so claims never
   * wait behind it (see README, "Retention"). One replica at a time prunes a table: a run takes
   * the table's lease in the maintenance table first, and a replica that finds it held skips the
   * run. Declare retention before `start()`; the first run is at start, then every `intervalMs`.
   */
  retain(table: QueueTableClass, options: RetainOptions): void {
    this.#retention.declare(table, options, this.#state);
  }

  stats(): BrokerStats {
    return {
      pool: this.#driver?.stats() ?? { size: 0, held: 0, idle: 0, spare: 0, maxHeld: 0, reservedForRenewals: 0 },
      subscriptions: [...this.#subscriptions.values()].map((subscription) => subscription.stats()),
      listener: this.#listener?.stats(),
      relays: this.#relays.map((relay) => relay.stats()),
      schedules: this.#schedules.stats(),
      retention: this.#retention.stats(),
    };
  }

  /**
   * The AsyncAPI 3.0.0 document of this broker's queues (see README, "AsyncAPI"): a channel per
   * queue it subscribes to, schedules into, dead-letters into, relays, or that `options.publishes`
   * lists; the database as the server, without user or password. Plain JSON data; nothing connects.
   */
  asyncapi(options?: AsyncApiOptions): AsyncApiDocument {
    return describeBroker(
      {
        database: this.#options.database,
        subscriptions: [...this.#subscriptions.values()],
        schedules: (this.#schedules.scheduler?.declarations ?? []).map(({ name, queue, cron }) => ({
          name,
          queue,
          cron: cron.expression,
          timeZone: cron.timeZone,
        })),
        relays: this.#relays.map((relay) => ({ outbox: relay.outbox.spec, destination: relay.destination.description })),
      },
      options,
    );
  }

  async #stop(timeoutMs: number): Promise<void> {
    this.#state = 'stopping';
    await Promise.allSettled([
      this.#controlRead?.stop(),
      this.#schedules.stop(),
      this.#retention.stop(),
      this.#listener?.close(),
      ...[...this.#subscriptions.values()].map((subscription) => subscription.stop(timeoutMs)),
      ...this.#relays.map((relay) => relay.stop(timeoutMs)),
    ]);
    await this.#heartbeat?.stop();
    if (this.#driver !== undefined) await closeBrokerPool(this.#driver, (error, detail) => this.#reportError(error, detail));
    await this.#observability.close();
    this.#state = 'stopped';
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
    schedulerOf = (broker) => broker.#schedules.scheduler;
    retainerOf = (broker) => broker.#retention.retainer;
    controlReadOf = (broker) => broker.#controlRead;
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

/**
 * What a test reaches in a broker's retention (not exported by the package): a signal per run
 * and per batch. Declare with `retain()` first.
 */
export function retentionTestHooksOf(broker: Broker): RetainerTestHooks {
  const retainer = retainerOf(broker);
  if (retainer === undefined) throw new Error('this broker retains no table');
  return retainer.testHooks;
}

/**
 * For tests, and not exported from the package: a signal per read of the broker's pauses and
 * cancels (see broker-control-read.ts). The read exists from `start()` on, where both tables do.
 */
export function controlReadTestHooksOf(broker: Broker): ControlReadTestHooks {
  const controlRead = controlReadOf(broker);
  if (controlRead === undefined) throw new Error('this broker reads no pauses and cancels in one read (not started, or a table is missing)');
  return controlRead.testHooks;
}
