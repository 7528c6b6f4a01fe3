import type { Queue } from '../definition/define-table.js';
import type { PoolStats } from '../driver/driver.js';
import type { Counter, Gauge, Histogram, MetricFamily } from './metric-registry.js';
import { MetricRegistry } from './metric-registry.js';

/** Handler durations: 5 ms to a minute; longer handlers land in `+Inf`. */
export const HANDLER_DURATION_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Publish to handler start: 1 ms (a wake-up in the same process) to five minutes (a queue
 * falling behind); a poll across processes lands around the poll interval, 1 s by default.
 */
export const PUBLISH_TO_HANDLER_BUCKETS_SECONDS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300,
];

/**
 * What became of a claimed message: the settlement that took effect (a handler that threw is
 * settled as `retryAfter`, or `retry` without a retryAfter column), or why none did: the lease
 * was gone (`leaseLost`) or the settlement's statement failed (`failed`). `cancelled`: the
 * message was cancelled while in work and removed, whatever its handler returned.
 */
export type SettledOutcome = 'ack' | 'drop' | 'retry' | 'retryAfter' | 'deadLetter' | 'cancelled' | 'leaseLost' | 'failed';

const SETTLED_OUTCOMES: readonly SettledOutcome[] = ['ack', 'drop', 'retry', 'retryAfter', 'deadLetter', 'cancelled', 'leaseLost', 'failed'];

/** The subscription's own counts (its `stats()`), copied into metrics when they are read. */
export interface SubscriptionCounts {
  readonly claims: number;
  readonly emptyClaims: number;
  readonly failedClaims: number;
  readonly deadlocksRetried: number;
  readonly leaseRenewals: number;
  readonly leasesLost: number;
  readonly handlerErrors: number;
  readonly decodeFailures: number;
  readonly timedOut: number;
  readonly cancelled: number;
  readonly inWork: number;
  readonly connectionsHeld: number;
  /** Whether an operator paused the queue, as the subscription last read it. */
  readonly paused: boolean;
  /** The subscription's `concurrency` limits, when it declares them. */
  readonly concurrency?: { readonly global: number | undefined; readonly perKey: number | undefined } | undefined;
  /** The subscription's `rate`, when it declares one. */
  readonly rate?: { readonly limit: number; readonly perMs: number } | undefined;
  /** Claims that found no rate slot free; counted only under a rate. */
  readonly rateHeldBack?: number;
}

export interface SubscriptionLabels {
  /** The table's qualified name. */
  readonly table: string;
  /** The group, or empty text on a table without groups. */
  readonly queue: string;
}

const LABELS = ['table', 'queue'];

/** What a relay's metrics read from its `stats()`. */
export interface RelayMetricCounts {
  readonly outbox: string;
  readonly destination: string;
  readonly relayed: number;
  readonly sends: number;
  readonly failedSends: number;
  readonly leasesLost: number;
  readonly namesInWork: number;
  readonly namesWaitingToRetry: number;
}

type RelayCopiedCount = 'relayed' | 'sends' | 'failedSends' | 'leasesLost';

const RELAY_LABELS = ['outbox', 'destination'];

/** The counts copied into counters; the others go into gauges. */
type CopiedCount = keyof Omit<SubscriptionCounts, 'inWork' | 'connectionsHeld' | 'paused' | 'concurrency' | 'rate' | 'rateHeldBack'>;

/** The per-subscription series counted on the delivery path, resolved once when it opens. */
export class SubscriptionMetrics {
  readonly handlerSeconds: Histogram;
  readonly publishToHandlerSeconds: Histogram;
  readonly #settled: Readonly<Record<SettledOutcome, Counter>>;

  constructor(series: {
    handlerSeconds: Histogram;
    publishToHandlerSeconds: Histogram;
    settled: Readonly<Record<SettledOutcome, Counter>>;
  }) {
    this.handlerSeconds = series.handlerSeconds;
    this.publishToHandlerSeconds = series.publishToHandlerSeconds;
    this.#settled = series.settled;
  }

  countSettled(outcome: SettledOutcome): void {
    this.#settled[outcome].inc();
  }
}

/**
 * The broker's metrics. Counts the subscription already keeps (claims, leases, deadlocks) are
 * copied from its stats when metrics are read, so they cost nothing per message; outcomes,
 * durations, latencies and publishes are counted where they happen, on series resolved once.
 */
export class BrokerMetrics {
  readonly #registry = new MetricRegistry();
  readonly #published: MetricFamily<Counter>;
  readonly #publishedByQueue = new WeakMap<Queue<unknown>, Counter>();
  readonly #keyed: MetricFamily<Counter>;
  readonly #handled: MetricFamily<Counter>;
  readonly #handlerSeconds: MetricFamily<Histogram>;
  readonly #publishToHandlerSeconds: MetricFamily<Histogram>;
  readonly #copied: Record<CopiedCount, MetricFamily<Counter>>;
  readonly #inWork: MetricFamily<Gauge>;
  readonly #subscriptionConnections: MetricFamily<Gauge>;
  readonly #paused: MetricFamily<Gauge>;
  readonly #concurrencyLimit: MetricFamily<Gauge>;
  readonly #rateLimit: MetricFamily<Gauge>;
  readonly #rateWindowSeconds: MetricFamily<Gauge>;
  readonly #rateHeldBack: MetricFamily<Counter>;
  readonly #scheduleFires: MetricFamily<Counter>;
  readonly #scheduleMissed: MetricFamily<Counter>;
  readonly #prunedRows: MetricFamily<Counter>;
  readonly #relayCopied: Record<RelayCopiedCount, MetricFamily<Counter>>;
  readonly #relayNamesInWork: MetricFamily<Gauge>;
  readonly #relayNamesWaiting: MetricFamily<Gauge>;

  constructor(poolStats: () => PoolStats | undefined) {
    const registry = this.#registry;
    const counter = (name: string, help: string, labelNames = LABELS) => registry.counter({ name, help, labelNames });
    this.#published = counter('tablequeue_messages_published_total', 'Messages written by publish and publishMany (with tx: written, whether or not the transaction commits).');
    this.#keyed = counter(
      'tablequeue_publishes_deduplicated_total',
      'Keyed publishes that met a row holding their key: status duplicate (nothing written) or replaced (the waiting row took the new values).',
      [...LABELS, 'status'],
    );
    this.#copied = {
      claims: counter('tablequeue_claims_total', 'Claim statements run, including those that took nothing or failed.'),
      emptyClaims: counter('tablequeue_empty_claims_total', 'Claims that found no row to take.'),
      failedClaims: counter('tablequeue_claim_errors_total', 'Claims that failed and were reported (the next claim waits a second).'),
      deadlocksRetried: counter('tablequeue_deadlocks_retried_total', 'Claims and lease settlements that met a deadlock, a lock wait timeout or a Galera certification failure and ran again.'),
      handlerErrors: counter('tablequeue_handler_errors_total', 'Handler calls that threw.'),
      decodeFailures: counter('tablequeue_decode_failures_total', 'Claimed rows whose payload or headers did not decode.'),
      leaseRenewals: counter('tablequeue_leases_renewed_total', 'Lease renewals that held.'),
      leasesLost: counter('tablequeue_leases_lost_total', 'Lease renewals that found the lease gone.'),
      timedOut: counter(
        'tablequeue_timed_out_total',
        'Messages whose handler ran past its timeoutMs: its signal was aborted, and the delivery failed unless the handler returned within the grace.',
      ),
      cancelled: counter('tablequeue_cancelled_total', 'Messages cancelled while in work here (broker.cancel, tablequeue cancel): settled as cancelled, never retried.'),
    };
    this.#handled = counter(
      'tablequeue_messages_handled_total',
      'Claimed messages by what became of them: the settlement that took effect, leaseLost, or failed (the settlement did not run).',
      [...LABELS, 'outcome'],
    );
    this.#handlerSeconds = registry.histogram({
      name: 'tablequeue_handler_duration_seconds',
      help: 'Seconds each handler call took (one call per message, or per batch).',
      labelNames: LABELS,
      buckets: HANDLER_DURATION_BUCKETS_SECONDS,
    });
    this.#publishToHandlerSeconds = registry.histogram({
      name: 'tablequeue_publish_to_handler_seconds',
      help: 'Seconds from a row being due (its publish time, without a delay) to its handler starting; first attempts on tables with retryAfter and attempt columns.',
      labelNames: LABELS,
      buckets: PUBLISH_TO_HANDLER_BUCKETS_SECONDS,
    });
    this.#inWork = registry.gauge({ name: 'tablequeue_deliveries_in_work', help: 'Deliveries whose handlers run now.', labelNames: LABELS });
    this.#subscriptionConnections = registry.gauge({
      name: 'tablequeue_subscription_held_connections',
      help: 'Connections the subscription holds now: claims running and deliveries that hold one.',
      labelNames: LABELS,
    });
    this.#paused = registry.gauge({
      name: 'tablequeue_queue_paused',
      help: 'Whether an operator paused the queue (broker.pause, tablequeue pause), 1 or 0, as the subscription last read it.',
      labelNames: LABELS,
    });
    this.#concurrencyLimit = registry.gauge({
      name: 'tablequeue_concurrency_limit',
      help: "A subscription's concurrency limit on the queue's rows in work across every broker: scope global, or perKey (per partition key).",
      labelNames: [...LABELS, 'scope'],
    });
    this.#rateLimit = registry.gauge({
      name: 'tablequeue_rate_limit',
      help: "A subscription's rate limit: claims of the queue within any window of tablequeue_rate_window_seconds, across every broker.",
      labelNames: LABELS,
    });
    this.#rateWindowSeconds = registry.gauge({
      name: 'tablequeue_rate_window_seconds',
      help: "The window of a subscription's rate limit, in seconds.",
      labelNames: LABELS,
    });
    this.#rateHeldBack = counter(
      'tablequeue_rate_held_back_total',
      'Claims that took nothing because every rate slot was used within the window; each waits until the next slot frees.',
    );
    this.#scheduleFires = counter(
      'tablequeue_schedule_fires_total',
      'Ticks of a schedule this broker fired: each wrote its message in the transaction that advanced the schedule.',
      ['schedule'],
    );
    this.#scheduleMissed = counter(
      'tablequeue_schedule_missed_total',
      "Ticks of a schedule this broker passed over without a message, by the schedule's missed policy (no replica ran in time).",
      ['schedule'],
    );
    this.#prunedRows = counter(
      'tablequeue_pruned_rows_total',
      'Rows retention deleted on this broker: processed rows and dead letters past their age, and passed dedupeForMs windows (broker.retain).',
      ['table', 'kind'],
    );
    const relayCounter = (name: string, help: string) => counter(name, help, RELAY_LABELS);
    this.#relayCopied = {
      relayed: relayCounter('tablequeue_outbox_relayed_total', 'Outbox records the destination confirmed and this broker\'s relay marked processed (or deleted).'),
      sends: relayCounter('tablequeue_outbox_sends_total', 'Batches of one record name the destination confirmed.'),
      failedSends: relayCounter(
        'tablequeue_outbox_failed_sends_total',
        'Batches whose send failed, or that held a record the destination could never take; their records wait a backoff and go again.',
      ),
      leasesLost: relayCounter('tablequeue_outbox_leases_lost_total', 'Batches whose lease another claim took while they were out; their records are sent again.'),
    };
    const relayGauge = (name: string, help: string) => registry.gauge({ name, help, labelNames: RELAY_LABELS });
    this.#relayNamesInWork = relayGauge('tablequeue_outbox_names_in_work', 'Record names this relay is sending now.');
    this.#relayNamesWaiting = relayGauge(
      'tablequeue_outbox_names_waiting_to_retry',
      'Record names whose last send failed, waiting their backoff; a name that stays here holds its later records back.',
    );
    const gauge = (name: string, help: string) => registry.gauge({ name, help }).labels();
    const pool = {
      size: gauge('tablequeue_pool_size_connections', 'The most connections the pool opens.'),
      held: gauge('tablequeue_pool_held_connections', 'Connections this broker holds now.'),
      idle: gauge('tablequeue_pool_idle_connections', 'Connections open and idle in the pool.'),
      maxHeld: gauge('tablequeue_pool_max_held_connections', 'The most connections this broker held at once.'),
    };
    registry.addCollector(() => {
      const stats = poolStats();
      pool.size.set(stats?.size ?? 0);
      pool.held.set(stats?.held ?? 0);
      pool.idle.set(stats?.idle ?? 0);
      pool.maxHeld.set(stats?.maxHeld ?? 0);
    });
  }

  /** Counts rows written to `queue`; the queue's series is looked up once per Queue object. */
  /** A keyed publish that wrote no new row. */
  countDeduplicated(queue: Queue<unknown>, status: 'duplicate' | 'replaced'): void {
    this.#keyed.labels(queue.table.spec.qualifiedName, queue.group ?? '', status).inc(1);
  }

  countPublished(queue: Queue<unknown>, count: number): void {
    let series = this.#publishedByQueue.get(queue);
    if (series === undefined) {
      series = this.#published.labels(queue.table.spec.qualifiedName, queue.group ?? '');
      this.#publishedByQueue.set(queue, series);
    }
    series.inc(count);
  }

  /** Resolves a subscription's series and copies its counts in whenever metrics are read. */
  forSubscription(labels: SubscriptionLabels, counts: () => SubscriptionCounts): SubscriptionMetrics {
    const values = [labels.table, labels.queue];
    const copied = Object.entries(this.#copied).map(([key, family]) => ({
      key: key as CopiedCount,
      series: family.labels(...values),
    }));
    const inWork = this.#inWork.labels(...values);
    const connections = this.#subscriptionConnections.labels(...values);
    const paused = this.#paused.labels(...values);
    // Only the limits a subscription declares get a series; they never change while it runs.
    const limits = counts().concurrency;
    for (const scope of ['global', 'perKey'] as const) {
      const limit = limits?.[scope];
      if (limit !== undefined) this.#concurrencyLimit.labels(...values, scope).set(limit);
    }
    const rate = counts().rate;
    if (rate !== undefined) {
      this.#rateLimit.labels(...values).set(rate.limit);
      this.#rateWindowSeconds.labels(...values).set(rate.perMs / 1000);
    }
    const rateHeldBack = rate === undefined ? undefined : this.#rateHeldBack.labels(...values);
    this.#registry.addCollector(() => {
      const now = counts();
      rateHeldBack?.setTotal(now.rateHeldBack ?? 0);
      for (const { key, series } of copied) series.setTotal(now[key]);
      inWork.set(now.inWork);
      connections.set(now.connectionsHeld);
      paused.set(now.paused ? 1 : 0);
    });
    const settled = Object.fromEntries(
      SETTLED_OUTCOMES.map((outcome) => [outcome, this.#handled.labels(...values, outcome)]),
    ) as Record<SettledOutcome, Counter>;
    return new SubscriptionMetrics({
      handlerSeconds: this.#handlerSeconds.labels(...values),
      publishToHandlerSeconds: this.#publishToHandlerSeconds.labels(...values),
      settled,
    });
  }

  /** Resolves a relay's series and copies its counts in whenever metrics are read. */
  forRelay(stats: () => RelayMetricCounts): void {
    const { outbox, destination } = stats();
    const copied = Object.entries(this.#relayCopied).map(([key, family]) => ({
      key: key as RelayCopiedCount,
      series: family.labels(outbox, destination),
    }));
    const namesInWork = this.#relayNamesInWork.labels(outbox, destination);
    const namesWaiting = this.#relayNamesWaiting.labels(outbox, destination);
    this.#registry.addCollector(() => {
      const now = stats();
      for (const { key, series } of copied) series.setTotal(now[key]);
      namesInWork.set(now.namesInWork);
      namesWaiting.set(now.namesWaitingToRetry);
    });
  }

  /** Rows a retention batch of this broker deleted (`kind`: processed or deadLetter). */
  countPruned(table: string, kind: string, rowCount: number): void {
    this.#prunedRows.labels(table, kind).inc(rowCount);
  }

  /** Counts a schedule's firing; a firing of nothing still creates the series, so both show from the start. */
  countSchedule(schedule: string, counts: { fired: number; missed: number }): void {
    this.#scheduleFires.labels(schedule).inc(counts.fired);
    this.#scheduleMissed.labels(schedule).inc(counts.missed);
  }

  render(): string {
    return this.#registry.render();
  }
}
