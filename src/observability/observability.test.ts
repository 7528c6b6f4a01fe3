import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import type { Message } from '../delivery/message.js';
import { ClosedError, DeclarationError } from '../errors.js';
import type { SubscriptionCounts } from './broker-metrics.js';
import { Observability } from './observability.js';

const counts: SubscriptionCounts = {
  claims: 7,
  emptyClaims: 3,
  failedClaims: 0,
  deadlocksRetried: 1,
  leaseRenewals: 2,
  leasesLost: 0,
  handlerErrors: 0,
  decodeFailures: 0,
  timedOut: 4,
  cancelled: 1,
  inWork: 1,
  connectionsHeld: 2,
  paused: true,
};

function message(attempt: number, retryAfter: unknown): Message<unknown> {
  return { id: '1', payload: {}, raw: undefined, attempt, partitionKey: null, headers: {}, group: 'emails', row: { retry_after: retryAfter } };
}

function sampleLine(text: string, prefix: string): string | undefined {
  return text.split('\n').find((line) => line.startsWith(prefix));
}

describe('Observability', () => {
  const table = defineTable({ table: 'jobs', id: 'id', group: 'queue', retryAfter: 'retry_after', attempt: 'attempt', payload: 'payload' });

  it('observes latency from retry_after on first attempts only, as a Date or as SQLite text', () => {
    const observability = new Observability({ poolStats: () => undefined });
    const observer = observability.forSubscription(table.queue('emails'), () => counts);
    const twoSecondsAgo = new Date(Date.now() - 2_000);
    observer.handlerEnded(observer.handlerStarting([message(1, twoSecondsAgo), message(2, twoSecondsAgo)]));
    observer.handlerStarting([message(1, twoSecondsAgo.toISOString().replace('Z', '+00:00')), message(1, null)]);
    const text = observability.metrics();
    expect(sampleLine(text, 'tablequeue_publish_to_handler_seconds_count')).toBe(
      'tablequeue_publish_to_handler_seconds_count{table="jobs",queue="emails"} 2',
    );
    expect(sampleLine(text, 'tablequeue_publish_to_handler_seconds_bucket{table="jobs",queue="emails",le="1"}')).toMatch(/ 0$/);
    expect(sampleLine(text, 'tablequeue_publish_to_handler_seconds_bucket{table="jobs",queue="emails",le="2.5"}')).toMatch(/ 2$/);
    expect(sampleLine(text, 'tablequeue_handler_duration_seconds_count')).toMatch(/ 1$/);
  });

  it('has no latency without an attempt column, where a retried row cannot be told apart', () => {
    const observability = new Observability({ poolStats: () => undefined });
    const noAttempt = defineTable({ table: 'plain', id: 'id', retryAfter: 'retry_after', payload: 'payload' });
    const observer = observability.forSubscription(noAttempt.queue('plain'), () => counts);
    observer.handlerStarting([message(1, new Date())]);
    expect(sampleLine(observability.metrics(), 'tablequeue_publish_to_handler_seconds_count')).toBe(
      'tablequeue_publish_to_handler_seconds_count{table="plain",queue=""} 0',
    );
  });

  it("copies the subscription's counts and the pool's when metrics are read", () => {
    const observability = new Observability({ poolStats: () => ({ size: 10, held: 2, idle: 3, spare: 8, maxHeld: 4, reservedForRenewals: 0 }) });
    const observer = observability.forSubscription(table.queue('emails'), () => counts);
    observer.settled('ack');
    observer.settled('leaseLost');
    const text = observability.metrics();
    const labels = '{table="jobs",queue="emails"}';
    expect(sampleLine(text, `tablequeue_claims_total${labels}`)).toBe(`tablequeue_claims_total${labels} 7`);
    expect(sampleLine(text, `tablequeue_empty_claims_total${labels}`)).toMatch(/ 3$/);
    expect(sampleLine(text, `tablequeue_deadlocks_retried_total${labels}`)).toMatch(/ 1$/);
    expect(sampleLine(text, `tablequeue_leases_renewed_total${labels}`)).toMatch(/ 2$/);
    expect(sampleLine(text, `tablequeue_timed_out_total${labels}`)).toMatch(/ 4$/);
    expect(sampleLine(text, `tablequeue_cancelled_total${labels}`)).toMatch(/ 1$/);
    expect(sampleLine(text, `tablequeue_subscription_held_connections${labels}`)).toMatch(/ 2$/);
    expect(sampleLine(text, `tablequeue_queue_paused${labels}`)).toMatch(/ 1$/);
    expect(sampleLine(text, 'tablequeue_messages_handled_total{table="jobs",queue="emails",outcome="ack"}')).toMatch(/ 1$/);
    expect(sampleLine(text, 'tablequeue_messages_handled_total{table="jobs",queue="emails",outcome="leaseLost"}')).toMatch(/ 1$/);
    expect(sampleLine(text, 'tablequeue_messages_handled_total{table="jobs",queue="emails",outcome="drop"}')).toMatch(/ 0$/);
    expect(sampleLine(text, 'tablequeue_pool_size_connections')).toBe('tablequeue_pool_size_connections 10');
    expect(sampleLine(text, 'tablequeue_pool_idle_connections')).toBe('tablequeue_pool_idle_connections 3');
  });

  it('counts what a publish wrote, by queue, and passes the options on unchanged without tracing', async () => {
    const observability = new Observability({ poolStats: () => undefined });
    const options = { headers: { a: 'b' } };
    const seen: unknown[] = [];
    await observability.publish(table.queue('emails'), options, async (given) => {
      seen.push(given);
      return '1';
    });
    await observability.publishMany(table.queue('emails'), [{ payload: 1 }, { payload: 2 }], async (items) => items.length);
    await expect(
      observability.publish(table.queue('sms'), undefined, () => Promise.reject(new Error('insert failed'))),
    ).rejects.toThrow('insert failed');
    expect(seen).toEqual([options]);
    expect(seen[0]).toBe(options);
    const text = observability.metrics();
    expect(sampleLine(text, 'tablequeue_messages_published_total{table="jobs",queue="emails"}')).toMatch(/ 3$/);
    expect(sampleLine(text, 'tablequeue_messages_published_total{table="jobs",queue="sms"}')).toBeUndefined();
  });

  it('serves GET and HEAD at /metrics only, refuses a bad port, and closes its endpoints', async () => {
    const observability = new Observability({ poolStats: () => undefined });
    await expect(observability.serveMetrics({ port: -1 })).rejects.toThrow(DeclarationError);
    const endpoint = await observability.serveMetrics({ port: 0 });
    const head = await fetch(endpoint.url, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await (await fetch(`${endpoint.url}?x=1`)).text()).toBe(observability.metrics());
    expect((await fetch(new URL('/', endpoint.url))).status).toBe(404);
    const taken = observability.serveMetrics({ port: endpoint.port });
    await expect(taken).rejects.toThrow(/could not listen on 127\.0\.0\.1:\d+ \(EADDRINUSE\)/);
    await observability.close();
    await expect(fetch(endpoint.url)).rejects.toThrow();
    await endpoint.close();
    await expect(observability.serveMetrics({ port: 0 })).rejects.toThrow(ClosedError);
  });
});
