import { Broker, testHooksOf } from '../broker/broker.js';
import type { BrokerOptions } from '../broker/broker-options.js';
import { openDialect } from '../broker/open-dialect.js';
import type { DdlDialectName, Queue, QueueTable } from '../definition/define-table.js';
import { checkMysqlServerVersion } from '../dialect/mysql/mysql-dialect.js';
import { dropTableIfExists } from '../dialect/drop-table-statements.js';
import type { Message } from '../delivery/message.js';
import type { StandardSchemaV1 } from '../delivery/standard-schema.js';
import { openMemoryDatabase } from '../driver/better-sqlite3/memory-database.js';
import { createDriver } from '../driver/create-driver.js';
import type { Driver } from '../driver/driver.js';
import { DeclarationError, type QueueError } from '../errors.js';
import type { KeyedPublishOptions, KeyedPublishResult, PublishItem, PublishOptions } from '../publish/publish-options.js';
import { bindStatement } from '../statement.js';
import type { BatchHandler, Handler, HandlerContext, SubscribeOptions } from '../subscription/subscription-options.js';
import { counted, DEFAULT_WAIT_TIMEOUT_MS, describeValue, distinctWithCounts, ExpectationWaits, summarized, type WaitOptions } from './expectation-waits.js';
import { HandlerRecorder, type RecorderHost } from './handler-recorder.js';

export interface TestBrokerOptions {
  /**
   * Tables created before the broker starts and dropped when it stops (a table of the same name
   * is dropped first): point a URL only at a database for tests.
   */
  readonly tables?: readonly QueueTable[];
  /**
   * A URL (`postgres://…`, `mysql://…`, `mariadb://…`, `sqlite:…`) or the service's own pool or
   * handle, as `new Broker` takes it. Default: a fresh SQLite database in memory (needs better-sqlite3).
   */
  readonly database?: string | object;
  /**
   * The rest of the broker's options. The test broker's defaults differ in two: `pollIntervalMs`
   * 100 (a retry due later is found within 0.1 s, not 1 s) and `stopTimeoutMs` 1,000.
   */
  readonly broker?: Omit<BrokerOptions, 'database'>;
  /** How long each wait lasts before it fails, in ms. Default 4,000: under Jest's default test timeout. */
  readonly timeoutMs?: number;
  /** Leave the tables in the database at `stop()`, to look at them after the test. Default false. */
  readonly keepTables?: boolean;
}

/** What was published to a queue: through the test broker, or by a recorded handler's `context.publish`. */
export interface PublishedMessage<Payload = unknown> {
  /** The row's id; undefined for rows of a `publishMany`. */
  readonly id: string | undefined;
  readonly payload: Payload;
  readonly options: PublishOptions | KeyedPublishOptions | undefined;
  /** `'test'`: the test published it; `'handler'`: a recorded handler did. */
  readonly from: 'test' | 'handler';
  /** A keyed publish's answer: published, duplicate or replaced. */
  readonly keyed?: KeyedPublishResult;
}

/** The test broker's defaults, argued in TestBrokerOptions.broker. */
const TEST_POLL_INTERVAL_MS = 100;
const TEST_STOP_TIMEOUT_MS = 1_000;

/**
 * Opens the database (SQLite in memory unless told), creates `tables`, and returns a test broker
 * around a real `Broker` that is not started yet: declare `record(...)` first. The broker starts
 * at the first publish or wait, or at `start()`.
 */
export async function startTestBroker(options: TestBrokerOptions = {}): Promise<TestBroker> {
  const ownsDatabase = options.database === undefined;
  const database = options.database ?? (await openMemoryDatabase());
  // The tables' statements go through a driver of their own: on SQLite in memory it shares the
  // broker's handle, elsewhere it is one connection beside the broker's pool.
  const driver = createDriver(database, { poolSize: 1 });
  try {
    await driver.open();
    const ddlDialect = await ddlDialectOf(driver);
    const tables = options.tables ?? [];
    for (const table of tables) {
      await driver.execute(bindStatement(dropTableIfExists(ddlDialect, table.spec), {}));
      for (const [index, sql] of table.createTableSql(ddlDialect).entries()) {
        await driver.execute({ name: `testing.createTable.${index}`, sql, values: [] });
      }
    }
    const dropTables = async (): Promise<void> => {
      if (options.keepTables === true) return;
      for (const table of [...tables].reverse()) await driver.execute(bindStatement(dropTableIfExists(ddlDialect, table.spec), {}));
    };
    return new TestBroker({ options, database, driver, ownsDatabase, dropTables });
  } catch (error) {
    await driver.close().catch(() => undefined);
    if (ownsDatabase) (database as { close(): unknown }).close();
    throw error;
  }
}

/** The server's spelling of DDL: MariaDB's differs from MySQL's where the two disagree. */
async function ddlDialectOf(driver: Driver): Promise<DdlDialectName> {
  const dialect = await openDialect(driver);
  if (dialect.name !== 'mysql') return dialect.name;
  const result = await driver.execute(bindStatement(dialect.session.serverVersion(), {}));
  return checkMysqlServerVersion(String(result.rows[0]?.['version'] ?? '')).flavor;
}

interface TestBrokerParts {
  readonly options: TestBrokerOptions;
  readonly database: string | object;
  readonly driver: Driver;
  readonly ownsDatabase: boolean;
  readonly dropTables: () => Promise<void>;
}

/**
 * A real broker for a test, recording what its handlers receive and how each message settles,
 * what is published, and the broker's errors and warnings; every wait resolves on the event it
 * waits for and fails after its timeout saying what it expected and what it saw.
 */
export class TestBroker {
  /** The broker itself: for `schedule`, `relay`, `pause`, `on(...)`, or a `subscribe` not recorded. */
  readonly broker: Broker;
  /** The database the broker was given: the URL, the service's pool, or the in-memory handle. */
  readonly database: string | object;
  readonly #parts: TestBrokerParts;
  readonly #waits = new ExpectationWaits();
  readonly #timeoutMs: number;
  readonly #recorders = new Map<string, HandlerRecorder<never>>();
  readonly #published: { readonly label: string; readonly message: PublishedMessage }[] = [];
  readonly #errors: QueueError[] = [];
  readonly #warnings: string[] = [];
  #starting: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  constructor(parts: TestBrokerParts) {
    this.#parts = parts;
    this.database = parts.database;
    this.#timeoutMs = parts.options.timeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS;
    this.broker = new Broker({
      pollIntervalMs: TEST_POLL_INTERVAL_MS,
      stopTimeoutMs: TEST_STOP_TIMEOUT_MS,
      ...parts.options.broker,
      database: parts.database,
    });
    this.#listen();
  }

  /** The broker's `error` events so far (recorded instead of logged). */
  get errors(): readonly QueueError[] {
    return this.#errors;
  }

  /** The broker's warnings so far (recorded instead of logged). */
  get warnings(): readonly string[] {
    return this.#warnings;
  }

  /**
   * Subscribes `handler` (default: one that acks) to `queue` and records its calls and each
   * message's settlement. Declare before the broker starts. A recorded handler's
   * `context.publish` is recorded too (`published`).
   */
  record<Output>(
    queue: Queue<unknown>,
    handler: Handler<Output>,
    options: SubscribeOptions<Output> & { decode: StandardSchemaV1<unknown, Output>; batch?: undefined },
  ): HandlerRecorder<Output>;
  record<Payload>(queue: Queue<Payload>, handler: BatchHandler<Payload>, options: SubscribeOptions<Payload> & { batch: number }): HandlerRecorder<Payload>;
  record<Payload>(queue: Queue<Payload>, handler?: Handler<Payload>, options?: SubscribeOptions<Payload>): HandlerRecorder<Payload>;
  record(
    queue: Queue<unknown>,
    handler: Handler<unknown> | BatchHandler<unknown> = () => undefined,
    options: SubscribeOptions<unknown> = {},
  ): HandlerRecorder<unknown> {
    if (options.onThreads !== undefined) {
      throw new DeclarationError(`record "${queue.label}": a handler on worker threads runs outside this process, where it cannot be recorded; subscribe it with broker.subscribe`);
    }
    const recorder = new HandlerRecorder<unknown>(queue, this.#recorderHost());
    const recorded = async (delivered: Message<unknown> | Message<unknown>[], context: HandlerContext): Promise<unknown> => {
      const entry = recorder.feed.callStarted(Array.isArray(delivered) ? delivered : [delivered]);
      const recordingContext: HandlerContext = {
        ...context,
        publish: async (target, payload, publishOptions) => {
          const id = await context.publish(target, payload, publishOptions);
          this.#recordPublished(target, { id, payload, options: publishOptions, from: 'handler' });
          return id;
        },
      };
      try {
        const returned = await (handler as (delivered: unknown, context: HandlerContext) => unknown)(delivered, recordingContext);
        entry.returned(returned);
        return returned;
      } catch (error) {
        entry.threw(error);
        throw error;
      }
    };
    this.broker.subscribe(queue, recorded as Handler<unknown>, options);
    this.#recorders.set(queue.label, recorder as HandlerRecorder<never>);
    return recorder;
  }

  /** Starts the broker (the first publish or wait does it too). */
  start(): Promise<void> {
    this.#starting ??= this.broker.start().catch((error: unknown) => {
      this.#waits.stop(`the broker failed to start (${error instanceof Error ? error.message : String(error)})`);
      throw error;
    });
    return this.#starting;
  }

  /** Publishes through the broker (starting it first) and records it; answers as `broker.publish` does. */
  async publish<Payload>(queue: Queue<Payload>, payload: Payload, options: KeyedPublishOptions): Promise<KeyedPublishResult>;
  async publish<Payload>(queue: Queue<Payload>, payload: Payload, options?: PublishOptions): Promise<string>;
  async publish<Payload>(queue: Queue<Payload>, payload: Payload, options?: PublishOptions | KeyedPublishOptions): Promise<string | KeyedPublishResult> {
    await this.start();
    const answer = await this.broker.publish(queue, payload, options as PublishOptions);
    const answered = answer as string | KeyedPublishResult;
    if (typeof answered === 'string') this.#recordPublished(queue, { id: answered, payload, options, from: 'test' });
    else this.#recordPublished(queue, { id: answered.id, payload, options, from: 'test', keyed: answered });
    return answered;
  }

  /**
   * Publishes many rows in one insert per chunk (starting the broker first): a batch subscription
   * then finds them together in one claim.
   */
  async publishMany<Payload>(queue: Queue<Payload>, items: readonly PublishItem<Payload>[]): Promise<number> {
    await this.start();
    const written = await this.broker.publishMany(queue, items);
    for (const item of items) this.#recordPublished(queue, { id: undefined, payload: item.payload, options: item, from: 'test' });
    return written;
  }

  /** What was published to `queue` so far, in order: by the test and by recorded handlers. */
  published<Payload>(queue: Queue<Payload>): readonly PublishedMessage<Payload>[] {
    return this.#publishedTo(queue) as PublishedMessage<Payload>[];
  }

  /** Resolves with what was published to `queue` once there are at least `count` (default 1). */
  async waitForPublished<Payload>(queue: Queue<Payload>, count = 1, options: WaitOptions = {}): Promise<readonly PublishedMessage<Payload>[]> {
    await this.start();
    return this.#waits.until(
      'waitForPublished',
      `${counted(count, 'publish')} to "${queue.label}"`,
      () => {
        const published = this.#publishedTo(queue);
        return published.length >= count ? (published as PublishedMessage<Payload>[]) : undefined;
      },
      () => {
        const published = this.#publishedTo(queue);
        const payloads = summarized(published, (entry) => describeValue(entry.payload), (entry) => `from the ${entry.from}`);
        return `${counted(published.length, 'publish')}${published.length === 0 ? '' : ` (${payloads})`}${this.#describeProblems()}`;
      },
      options.timeoutMs ?? this.#timeoutMs,
    );
  }

  /** Resolves once every recorded queue is idle (see `HandlerRecorder.waitForIdle`). */
  async waitForIdle(options: WaitOptions = {}): Promise<void> {
    await this.start();
    await Promise.all([...this.#recorders.values()].map((recorder) => recorder.waitForIdle(options)));
  }

  /**
   * Stops the broker (handlers get `stopTimeoutMs`, default 1 s), fails the waits still pending,
   * drops the tables unless `keepTables`, and closes the database it opened. Twice is harmless.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    this.#waits.stop('the test broker stopped');
    const { driver, dropTables, ownsDatabase, database } = this.#parts;
    try {
      await this.broker.stop();
      await dropTables();
    } finally {
      await driver.close();
      if (ownsDatabase) (database as { close(): unknown }).close();
    }
  }

  #listen(): void {
    const broker = this.broker;
    broker.on('settled', (event) => {
      const settlement = { id: event.id, attempt: event.attempt, outcome: event.outcome, decodeFailed: false } as {
        id: string;
        attempt: number;
        outcome: typeof event.outcome;
        decodeFailed: boolean;
        error?: unknown;
        nextAttemptAt?: Date;
      };
      if (event.error !== undefined) settlement.error = event.error;
      if (event.nextAttemptAt !== undefined) settlement.nextAttemptAt = event.nextAttemptAt;
      this.#recorders.get(event.queue)?.feed.settled(settlement);
    });
    broker.on('deadLettered', (event) => this.#recorders.get(event.queue)?.feed.deadLettered(event.id, event.attempt, event.deadLetter));
    broker.on('cancelled', (event) =>
      this.#recorders.get(event.queue)?.feed.settled({ id: event.id, attempt: event.attempt, outcome: 'cancelled', decodeFailed: false }),
    );
    broker.on('timedOut', (event) => this.#recorders.get(event.queue)?.feed.timedOut(event.id));
    broker.on('error', (error, detail) => {
      this.#errors.push(error);
      const subscription = detail['subscription'];
      if (typeof subscription === 'string') this.#recorders.get(subscription)?.feed.reportError(error, detail);
      this.#waits.changed();
    });
    broker.on('warning', (message) => {
      this.#warnings.push(message);
    });
  }

  #recorderHost(): RecorderHost {
    return {
      waits: this.#waits,
      timeoutMs: this.#timeoutMs,
      ensureStarted: () => this.start(),
      untilIdle: (queue, where, timeoutMs) => this.#untilIdle(queue, where, timeoutMs),
      describeProblems: () => this.#describeProblems(),
    };
  }

  /**
   * Idle: a claim that began after this call came back empty while the subscription had nothing
   * in work or waiting for a worker. The claim loop's test signals say when a claim starts and
   * comes back; the subscription's stats, what it holds.
   */
  async #untilIdle(queue: Queue<unknown>, where: string, timeoutMs: number): Promise<void> {
    const { loop } = testHooksOf(this.broker, queue);
    let claimsBegun = 0;
    let isIdle = false;
    const holdsNothing = (): boolean => {
      const stats = this.broker.stats().subscriptions.find((subscription) => subscription.queue === queue.label);
      return stats !== undefined && stats.inWork === 0 && stats.waitingRows === 0;
    };
    // Observing turns a signal on, which keeps its emissions for a `next` no one here calls: cleared at each.
    const stopBegun = loop.claimStarted.observe(() => {
      loop.claimStarted.clear();
      claimsBegun += 1;
    });
    const stopEmpty = loop.claimCameBackEmpty.observe(() => {
      loop.claimCameBackEmpty.clear();
      if (claimsBegun === 0 || !holdsNothing()) return;
      isIdle = true;
      this.#waits.changed();
    });
    try {
      await this.#waits.until(
        where,
        `a claim of "${queue.label}" that finds nothing due while nothing is in work`,
        () => (isIdle ? true : undefined),
        () => {
          const stats = this.broker.stats().subscriptions.find((subscription) => subscription.queue === queue.label);
          const holding = stats === undefined ? 'no such subscription' : `${stats.inWork} in work, ${stats.waitingRows} waiting for a worker`;
          return `${counted(claimsBegun, 'claim')} begun, ${holding}${stats?.paused === true ? ', the queue paused' : ''}${this.#describeProblems()}`;
        },
        timeoutMs,
      );
    } finally {
      stopBegun();
      stopEmpty();
    }
  }

  #recordPublished(queue: Queue<unknown>, message: PublishedMessage): void {
    this.#published.push({ label: queue.label, message });
    this.#waits.changed();
  }

  #publishedTo(queue: Queue<unknown>): PublishedMessage[] {
    return this.#published.filter((entry) => entry.label === queue.label).map((entry) => entry.message);
  }

  /** The broker's errors and warnings, appended to a failure message. */
  #describeProblems(): string {
    const errors = distinctWithCounts(this.#errors.map((error) => `${error.name}: ${error.message}`)).slice(-5);
    const warnings = distinctWithCounts(this.#warnings).slice(-5);
    const parts = [
      errors.length === 0 ? undefined : `; broker errors: ${errors.join(' | ')}`,
      warnings.length === 0 ? undefined : `; broker warnings: ${warnings.join(' | ')}`,
    ];
    return parts.filter((part) => part !== undefined).join('');
  }
}
