import { describe, expect, it } from 'vitest';
import { ClosedError, Outcome } from '../../src/index.js';
import { createBroker, createTable, formsOf, jobsTable, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

interface Exposition {
  readonly types: ReadonlyMap<string, string>;
  readonly helps: ReadonlyMap<string, string>;
  readonly samples: readonly Sample[];
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/g;

/** Reads the text exposition format 0.0.4 strictly enough to catch a malformed line. */
function parseExposition(text: string): Exposition {
  expect(text.endsWith('\n')).toBe(true);
  const types = new Map<string, string>();
  const helps = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.slice(0, -1).split('\n')) {
    const comment = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line);
    if (comment) {
      (comment[1] === 'HELP' ? helps : types).set(comment[2]!, comment[3]!);
      continue;
    }
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const [, name, labelText, valueText] = match;
    const labels: Record<string, string> = {};
    let consumed = 0;
    for (const pair of (labelText ?? '').matchAll(LABEL_PAIR)) {
      labels[pair[1]!] = pair[2]!.replace(/\\(.)/g, (_, escaped: string) => (escaped === 'n' ? '\n' : escaped));
      consumed += pair[0].length;
    }
    if (consumed !== (labelText ?? '').length) throw new Error(`malformed labels: ${JSON.stringify(line)}`);
    const value = valueText === '+Inf' ? Number.POSITIVE_INFINITY : Number(valueText);
    if (Number.isNaN(value) && valueText !== 'NaN') throw new Error(`malformed value: ${JSON.stringify(line)}`);
    const family = name!.replace(/_(bucket|sum|count)$/, '');
    if (!types.has(name!) && types.get(family) !== 'histogram') throw new Error(`sample before its TYPE: ${line}`);
    samples.push({ name: name!, labels, value });
  }
  return { types, helps, samples };
}

/** The value of the one sample with exactly these labels. */
function valueOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = exposition.samples.filter(
    (sample) =>
      sample.name === name &&
      Object.keys(sample.labels).length === Object.keys(labels).length &&
      Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  if (found.length !== 1) throw new Error(`expected one ${name} ${JSON.stringify(labels)}, found ${found.length}`);
  return found[0]!.value;
}

/** The cumulative buckets of one histogram series: non-decreasing, and `+Inf` equals `_count`. */
function histogramCount(exposition: Exposition, name: string, labels: Record<string, string>): number {
  const buckets = exposition.samples.filter(
    (sample) => sample.name === `${name}_bucket` && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  expect(buckets.length).toBeGreaterThan(1);
  buckets.forEach((bucket, index) => {
    if (index > 0) expect(bucket.value).toBeGreaterThanOrEqual(buckets[index - 1]!.value);
  });
  expect(buckets.at(-1)!.labels['le']).toBe('+Inf');
  const count = valueOf(exposition, `${name}_count`, labels);
  expect(buckets.at(-1)!.value).toBe(count);
  expect(valueOf(exposition, `${name}_sum`, labels)).toBeGreaterThanOrEqual(0);
  return count;
}

type Kind = 'ack' | 'drop' | 'retry' | 'retryAfter' | 'throw' | 'dead';

/** `broker.metrics()` and its HTTP endpoint, after rows with known outcomes drain. */
export function metricsSuite(context: SuiteContext): void {
  const { stand } = context;
  for (const form of formsOf(stand)) {
    describe(`${form} metrics`, () => {
      it('counts publishes, outcomes, handler calls and first-attempt latencies exactly', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        broker.on('error', () => undefined);
        broker.subscribe(
          queue,
          (message) => {
            const kind = (message.payload as { kind: Kind }).kind;
            const isFirst = message.attempt === 1;
            if (kind === 'drop') return Outcome.drop();
            if (kind === 'dead') return Outcome.retry();
            if (kind === 'retry' && isFirst) return Outcome.retry();
            if (kind === 'retryAfter' && isFirst) return Outcome.retryAfter(10);
            if (kind === 'throw' && isFirst) throw new Error('first attempt fails');
            return Outcome.ack();
          },
          { maxAttempts: 2, deadLetter: 'emails.dead', retryBackoff: { initialMs: 10 } },
        );
        await broker.start();
        const kinds: Kind[] = ['drop', 'retry', 'retryAfter', 'throw', 'dead'];
        const publishedFromMs = Date.now();
        await broker.publishMany(queue, [{ payload: { kind: 'ack' } }, { payload: { kind: 'ack' } }, { payload: { kind: 'ack' } }]);
        for (const kind of kinds) await broker.publish(queue, { kind });
        await broker.publish(queue, Buffer.from('not json {'));
        await untilStats(broker, queue, (stats) => stats.acked === 6 && stats.dropped === 2 && stats.deadLettered === 1, 'every row settled');
        await broker.stop();
        const elapsedSeconds = (Date.now() - publishedFromMs) / 1000;

        const stats = broker.stats();
        const subscription = stats.subscriptions[0]!;
        const text = broker.metrics();
        const metrics = parseExposition(text);
        const labels = { table: 'jobs', queue: 'emails' };
        expect(valueOf(metrics, 'tablequeue_messages_published_total', labels)).toBe(9);
        const handled = (outcome: string) => valueOf(metrics, 'tablequeue_messages_handled_total', { ...labels, outcome });
        expect({
          ack: handled('ack'),
          drop: handled('drop'),
          retry: handled('retry'),
          retryAfter: handled('retryAfter'),
          deadLetter: handled('deadLetter'),
          leaseLost: handled('leaseLost'),
          failed: handled('failed'),
        }).toEqual({ ack: 6, drop: 2, retry: 2, retryAfter: 2, deadLetter: 1, leaseLost: 0, failed: 0 });
        expect(valueOf(metrics, 'tablequeue_handler_errors_total', labels)).toBe(1);
        expect(valueOf(metrics, 'tablequeue_decode_failures_total', labels)).toBe(1);
        // 3 acks, 1 drop, and two calls each for retry, retryAfter, throw and dead.
        expect(histogramCount(metrics, 'tablequeue_handler_duration_seconds', labels)).toBe(12);
        // Every row but the undecodable one reached its handler once on its first attempt.
        expect(histogramCount(metrics, 'tablequeue_publish_to_handler_seconds', labels)).toBe(8);
        // Each latency lies within the test's own run: read from the row's publish time, in UTC.
        expect(valueOf(metrics, 'tablequeue_publish_to_handler_seconds_sum', labels)).toBeLessThanOrEqual(8 * elapsedSeconds);
        expect(valueOf(metrics, 'tablequeue_claims_total', labels)).toBe(subscription.claims);
        expect(subscription.claims).toBeGreaterThan(0);
        expect(valueOf(metrics, 'tablequeue_empty_claims_total', labels)).toBe(subscription.emptyClaims);
        expect(valueOf(metrics, 'tablequeue_claim_errors_total', labels)).toBe(0);
        expect(valueOf(metrics, 'tablequeue_deadlocks_retried_total', labels)).toBe(subscription.deadlocksRetried);
        expect(valueOf(metrics, 'tablequeue_leases_renewed_total', labels)).toBe(subscription.leaseRenewals);
        expect(valueOf(metrics, 'tablequeue_leases_lost_total', labels)).toBe(0);
        expect(valueOf(metrics, 'tablequeue_deliveries_in_work', labels)).toBe(0);
        expect(valueOf(metrics, 'tablequeue_pool_size_connections')).toBe(stats.pool.size);
        expect(valueOf(metrics, 'tablequeue_pool_held_connections')).toBe(stats.pool.held);
        expect(valueOf(metrics, 'tablequeue_pool_max_held_connections')).toBe(stats.pool.maxHeld);
        expect(stats.pool.maxHeld).toBeGreaterThan(0);
        expect(metrics.types.get('tablequeue_claims_total')).toBe('counter');
        expect(metrics.types.get('tablequeue_handler_duration_seconds')).toBe('histogram');
        expect(metrics.types.get('tablequeue_pool_idle_connections')).toBe('gauge');
        for (const name of metrics.types.keys()) expect(metrics.helps.get(name)?.length).toBeGreaterThan(0);
      });
    });
  }

  describe('metrics endpoint', () => {
    it('serves the same text at GET /metrics with the exposition content type, and stop() closes it', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      expect(broker.metrics()).toContain('# TYPE tablequeue_messages_published_total counter\n');
      await broker.start();
      await broker.publish(queue, { n: 1 });
      await broker.publishMany(queue, [{ payload: { n: 2 } }, { payload: { n: 3 } }]);
      const endpoint = await broker.serveMetrics({ port: 0 });
      expect(endpoint.url).toBe(`http://127.0.0.1:${endpoint.port}/metrics`);
      const response = await fetch(endpoint.url);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
      const served = await response.text();
      expect(served).toBe(broker.metrics());
      expect(valueOf(parseExposition(served), 'tablequeue_messages_published_total', { table: 'jobs', queue: 'emails' })).toBe(3);
      expect((await fetch(new URL('/other', endpoint.url))).status).toBe(404);
      expect((await fetch(endpoint.url, { method: 'POST' })).status).toBe(405);
      await broker.stop();
      await expect(fetch(endpoint.url)).rejects.toThrow();
      await expect(broker.serveMetrics({ port: 0 })).rejects.toThrow(ClosedError);
    });
  });
}
