import type { Queue } from '../definition/define-table.js';
import type { PoolStats } from '../driver/driver.js';
import { ClosedError } from '../errors.js';
import type { KeyedPublishResult, PublishItem, PublishOptions } from '../publish/publish-options.js';
import { BrokerMetrics, type RelayMetricCounts, type SubscriptionCounts } from './broker-metrics.js';
import { serveMetrics, type MetricsEndpoint, type ServeMetricsOptions } from './metrics-endpoint.js';
import { SubscriptionObserver } from './subscription-observer.js';
import { loadTracing, type Tracing } from './tracing.js';

/**
 * A broker's metrics, spans and metrics endpoints. Metrics count from construction; spans start
 * at `start()`, only when an OpenTelemetry SDK is registered by then; `close()` ends the endpoints.
 */
export class Observability {
  readonly #metrics: BrokerMetrics;
  readonly #endpoints = new Set<MetricsEndpoint>();
  #tracing: Tracing | undefined;
  #isClosed = false;

  constructor(options: { poolStats: () => PoolStats | undefined }) {
    this.#metrics = new BrokerMetrics(options.poolStats);
  }

  /** Loads `@opentelemetry/api` when it is installed; without it, or without an SDK, no spans. */
  async start(): Promise<void> {
    this.#tracing = await loadTracing();
  }

  metrics(): string {
    return this.#metrics.render();
  }

  async serveMetrics(options: ServeMetricsOptions): Promise<MetricsEndpoint> {
    if (this.#isClosed) throw new ClosedError('the broker is stopped; serveMetrics needs a broker that has not stopped');
    const endpoint = await serveMetrics(options, () => this.metrics());
    if (this.#isClosed) {
      await endpoint.close();
      throw new ClosedError('the broker stopped while the metrics endpoint opened; it is closed again');
    }
    this.#endpoints.add(endpoint);
    return {
      url: endpoint.url,
      host: endpoint.host,
      port: endpoint.port,
      close: () => {
        this.#endpoints.delete(endpoint);
        return endpoint.close();
      },
    };
  }

  /** Closes every metrics endpoint; `metrics()` still answers. */
  async close(): Promise<void> {
    this.#isClosed = true;
    const endpoints = [...this.#endpoints];
    this.#endpoints.clear();
    await Promise.all(endpoints.map((endpoint) => endpoint.close()));
  }

  /** The observer of one subscription, its series resolved now; `counts` is read at each scrape. */
  forSubscription(queue: Queue<unknown>, counts: () => SubscriptionCounts): SubscriptionObserver {
    const spec = queue.table.spec;
    return new SubscriptionObserver({
      spec,
      metrics: this.#metrics.forSubscription({ table: spec.qualifiedName, queue: queue.group ?? '' }, counts),
      tracing: this.#tracing?.forSubscription(queue.label),
    });
  }

  /**
   * Counts a publish and, with tracing on, wraps it in a producer span whose context goes into the
   * headers. A keyed publish counts only when it wrote a row (`published`).
   */
  async publish<Options extends PublishOptions, Result extends string | KeyedPublishResult>(
    queue: Queue<unknown>,
    options: Options | undefined,
    write: (options: Options | undefined) => Promise<Result>,
  ): Promise<Result> {
    const tracing = this.#tracing;
    const result =
      tracing === undefined
        ? await write(options)
        : await tracing.publish(queue.label, 1, (trace) => write(withTraceHeaders(queue, options, trace)), idOfPublish);
    if (typeof result === 'string' || result.status === 'published') this.#metrics.countPublished(queue, 1);
    else this.#metrics.countDeduplicated(queue, result.status);
    return result;
  }

  async publishMany<Payload>(
    queue: Queue<unknown>,
    items: readonly PublishItem<Payload>[],
    write: (items: readonly PublishItem<Payload>[]) => Promise<number>,
  ): Promise<number> {
    const tracing = this.#tracing;
    const count =
      tracing === undefined || !Array.isArray(items)
        ? await write(items)
        : await tracing.publish(
            queue.label,
            items.length,
            (trace) => write(items.map((item) => withTraceHeaders(queue, item, trace))),
            () => undefined,
          );
    this.#metrics.countPublished(queue, count);
    return count;
  }

  /** A retention batch committed: the rows it deleted of one kind. */
  pruned(table: string, kind: string, rowCount: number): void {
    this.#metrics.countPruned(table, kind, rowCount);
  }

  /** A relay opened: its counts are copied into the metrics at each scrape. */
  forRelay(stats: () => RelayMetricCounts): void {
    this.#metrics.forRelay(stats);
  }

  /** A schedule's firing committed: the ticks it wrote messages for, and those it counted missed. */
  scheduleCounted(schedule: string, counts: { fired: number; missed: number }): void {
    this.#metrics.countSchedule(schedule, counts);
  }
}

/**
 * The publish's options with the trace headers added, when the table has a headers column to
 * carry them. Headers the caller set keep their values, a `traceparent` of its own included.
 */
function idOfPublish(result: string | KeyedPublishResult): string | undefined {
  return typeof result === 'string' ? result : result.id;
}

function withTraceHeaders<Options extends PublishOptions | undefined>(
  queue: Queue<unknown>,
  options: Options,
  trace: Record<string, string>,
): Options {
  if (queue.table.spec.headers === undefined || Object.keys(trace).length === 0) return options;
  if (options === undefined) return { headers: trace } as Options;
  // Options the publisher will refuse are passed on unchanged, for it to say what is wrong.
  if (options === null || typeof options !== 'object' || !isHeaderMap(options.headers)) return options;
  return { ...options, headers: { ...trace, ...options.headers } };
}

function isHeaderMap(headers: unknown): headers is Record<string, string> | undefined {
  return headers === undefined || (typeof headers === 'object' && headers !== null && !Array.isArray(headers));
}
