/**
 * The JSON between the dashboard's server and its page: what each endpoint answers and what a
 * requeue sends. The page script (`browser/`) is compiled for the browser on its own, so this
 * module imports nothing: the page reads these types, and the server checks every body it sends
 * against them (`satisfies`), which keeps the two in step at compile time.
 */

/** `GET /api/config`: what the page learns once, at load. */
export interface DashboardConfig {
  readonly allowActions: boolean;
  readonly refreshMs: number;
  readonly tables: readonly string[];
  readonly heartbeatTable: string;
  readonly schedulesTable: string;
  /** Where pauses are kept (the brokers' queueControlsTable). */
  readonly queueControlsTable: string;
  /** For the page's header: `postgres at 127.0.0.1:5432`. */
  readonly database: string;
}

/** `GET /api/queues`. */
export interface QueuesBody {
  readonly tables: readonly QueueTableView[];
}

/** One table of `/api/queues` as the page reads it: of the sampler's `TableSnapshot`, what the page shows. */
export interface QueueTableView {
  readonly table: string;
  readonly deadLetter: { readonly kind: 'group' | 'table' } | null;
  readonly groups: readonly QueueGroupView[];
  readonly deadLettered: number;
  /** Milliseconds since the epoch, host clock; null until the first round read the table. */
  readonly readAt: number | null;
  readonly error: string | null;
  /** Live brokers reading the table and the groups with ready rows none of them reads; null when the heartbeats cannot tell. */
  readonly readers: {
    readonly brokers: number;
    readonly unreadGroups: readonly string[];
    /** Per queue the reporting brokers read: the limits they declare, timed-out and cancelled counts. */
    readonly reported: readonly {
      readonly group: string | null;
      readonly limits: readonly string[];
      /** Why a reporting lease subscription's claims count the queue's rows in work; null when none does. */
      readonly countsRowsInWork: 'concurrency' | 'fifo' | null;
      readonly timedOut: number;
      readonly cancelled: number;
    }[];
  } | null;
  /** Queues whose claims count their rows in work while no index serves the count, and the index to add; null otherwise. */
  readonly unindexedRowsInWork: {
    readonly queues: readonly { readonly group: string | null; readonly reason: 'concurrency' | 'fifo' }[];
    readonly createIndexSql: string;
  } | null;
  /** What an operator paused (`tablequeue pause`, the page): null when the queue controls table cannot be read. */
  readonly paused: PausedView | null;
}

/** The paused queues of one table. */
export interface PausedView {
  /** Every queue of the table (and a table without groups) is paused. */
  readonly wholeTable: boolean;
  /** Groups paused one by one. */
  readonly groups: readonly string[];
}

/** One group's counts (`GroupCounts`) as the page shows them. */
export interface QueueGroupView {
  readonly group: string | null;
  readonly ready: number;
  readonly delayed: number;
  readonly inWork: number;
  readonly processed: number;
  readonly oldestReadyAgeSeconds: number | null;
  readonly deadLettered?: number;
}

/** `GET /api/throughput`. */
export interface ThroughputBody {
  readonly intervalMs: number;
  readonly points: readonly ThroughputPoint[];
}

/** One point of the throughput chart, summed over every table read in that round. */
export interface ThroughputPoint {
  /** Milliseconds since the epoch, host clock. */
  readonly at: number;
  /** Ready, delayed and in work, dead letters left out. */
  readonly depth: number;
  /**
   * Rows finished per second since the previous round: from the inspections (see
   * `drainedBetween`), or from the brokers' own counters when they report a higher rate.
   */
  readonly drainedPerSecond: number;
}

/** `GET /api/dead-letters`. */
export interface DeadLettersBody {
  readonly tables: readonly DeadLetterTableView[];
}

export interface DeadLetterTableView {
  readonly table: string;
  /** `group:<name>` or `table:<name>`; null when the dashboard was not told where dead letters go. */
  readonly location: string | null;
  /** Every dead letter of the table, of which `rows` lists the first; what "requeue all" moves. */
  readonly deadLettered: number;
  readonly rows: readonly DeadLetterView[];
  readonly error: string | null;
}

/** One dead letter as the page lists it. */
export interface DeadLetterView {
  readonly id: string;
  readonly group: string | null;
  /** The attempt column as stored: one past the attempts made, for a dead letter of any form. */
  readonly attempt: number | null;
  /** The deliveries the row had before it became a dead letter (`PeekedRow.attemptsMade`). */
  readonly attemptsMade: number | null;
  readonly lastError: string | null;
  /** The payload as JSON text, cut to `PAYLOAD_PREVIEW_CHARACTERS`. */
  readonly payloadPreview: string;
}

/** `GET /api/brokers`: the heartbeat table as the page reads it (the directory's `BrokerList`). */
export interface BrokersBody {
  readonly table: string;
  readonly brokers: readonly BrokerView[];
  /** Rows of brokers that stopped beating without deleting them (killed, say). */
  readonly staleCount: number;
  /** Why the table could not be read; null when read. */
  readonly problem: string | null;
}

export interface BrokerView {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly seenMsAgo: number;
  readonly startedMsAgo: number;
  /** The broker's `stats().subscriptions` as it wrote them, any version: the page checks each before showing it. */
  readonly subscriptions: readonly unknown[];
  /** Its outbox relays, as its last beat reported them. */
  readonly relays: readonly RelayView[];
}

/** An outbox relay in a broker's heartbeat: of its `stats()`, what the operator tools show. */
export interface RelayView {
  /** The outbox table, `schema.table` or `table`. */
  readonly outbox: string;
  readonly destination: string;
  readonly relayed: number;
  readonly failedSends: number;
  readonly namesInWork: number;
  readonly namesWaitingToRetry: number;
  /** Up to 10 of the names waiting to retry, the soonest to go again first. */
  readonly waitingNames: readonly WaitingNameView[];
}

export interface WaitingNameView {
  readonly name: string;
  /** Sends of the name that failed in a row. */
  readonly failedSends: number;
  /** From the read of the heartbeat table until the name goes again; 0 when due. */
  readonly retryInMs: number;
  /** The last send's error; null when the send could not begin. */
  readonly error: string | null;
}

/** `GET /api/schedules`: the schedules table as the page reads it (the listing's `ScheduleList`). */
export interface SchedulesBody {
  readonly table: string;
  readonly schedules: readonly ScheduleView[];
  /** Why the table could not be read (none until a broker with schedules starts): the page then hides the section. */
  readonly problem: string | null;
}

export interface ScheduleView {
  readonly name: string;
  /** `table/group`. */
  readonly queue: string;
  readonly cron: string;
  readonly timeZone: string;
  /** ISO instants; null before the first tick, or when the row's cron does not parse. */
  readonly lastTickAt: string | null;
  readonly nextTickAt: string | null;
  readonly firedCount: number;
  readonly missedCount: number;
  /** When a broker last declared it, ISO: a schedule no code declares any more keeps an old one. */
  readonly declaredAt: string;
}

/** `POST /api/requeue`'s body. */
export interface RequeueRequest {
  readonly table: string;
  /** Rows to move; all of the table's dead letters when absent. */
  readonly ids?: readonly string[];
  /** The queue to move them to, needed when dead letters sit in a group of the same table. */
  readonly toGroup?: string;
}

/** `POST /api/requeue`'s answer. */
export interface RequeueAnswer {
  readonly moved: number;
}

/** `POST /api/pause`'s body: pause or resume one group of a table, or the whole table (`group` null). */
export interface PauseRequest {
  readonly table: string;
  readonly group: string | null;
  readonly paused: boolean;
}

/** `POST /api/pause`'s answer: whether that queue is paused now (a group stays paused while its whole table is). */
export interface PauseAnswer {
  readonly paused: boolean;
}

/** What every endpoint answers with a status other than 200. */
export interface ErrorAnswer {
  readonly error: string;
}
