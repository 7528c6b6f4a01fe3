import * as api from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import type { Message } from '../delivery/message.js';
import { Tracing } from './tracing.js';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracing = new Tracing(api, provider.getTracer('test'));

function message(id: string, headers: Record<string, string>): Message<unknown> {
  return { id, payload: {}, raw: undefined, attempt: 1, partitionKey: null, headers, group: 'emails', row: {} };
}

describe('Tracing', () => {
  afterEach(() => exporter.reset());

  it("writes the producer span's traceparent, and the consumer span continues it with its tracestate", async () => {
    const headers = await tracing.publish('jobs/emails', 1, async (trace) => trace, () => '42');
    const [producer] = exporter.getFinishedSpans();
    const { traceId, spanId } = producer!.spanContext();
    expect(headers).toEqual({ traceparent: `00-${traceId}-${spanId}-01` });
    expect(producer!.attributes['messaging.message.id']).toBe('42');

    const subscription = tracing.forSubscription('jobs/emails');
    const span = subscription.startProcess([message('42', { ...headers, tracestate: 'vendor=value' })]);
    expect(await span.run(async () => 'handled')).toBe('handled');
    span.end();
    const consumer = exporter.getFinishedSpans()[1]!;
    expect(consumer.name).toBe('process jobs/emails');
    expect(consumer.spanContext().traceId).toBe(traceId);
    expect(consumer.parentSpanContext).toMatchObject({ spanId, isRemote: true });
    expect(consumer.parentSpanContext?.traceState?.get('vendor')).toBe('value');
  });

  it('starts a new trace when the headers carry no valid traceparent', () => {
    const span = tracing.forSubscription('jobs/emails').startProcess([message('1', { traceparent: 'garbage' })]);
    span.end();
    const [consumer] = exporter.getFinishedSpans();
    expect(consumer!.parentSpanContext).toBeUndefined();
  });

  it('marks a failed publish, claim and settle with an error status and rethrows', async () => {
    const subscription = tracing.forSubscription('jobs/emails');
    await expect(tracing.publish('jobs/emails', 2, () => Promise.reject(new Error('insert')), () => undefined)).rejects.toThrow('insert');
    await expect(subscription.claim(() => Promise.reject(new Error('claim')))).rejects.toThrow('claim');
    await expect(subscription.settle(undefined, '1', 'ack', () => Promise.reject(new Error('settle')))).rejects.toThrow('settle');
    const spans = exporter.getFinishedSpans();
    expect(spans.map((span) => [span.name, span.status.code, span.status.message])).toEqual([
      ['publish jobs/emails', api.SpanStatusCode.ERROR, 'insert'],
      ['claim jobs/emails', api.SpanStatusCode.ERROR, 'claim'],
      ['settle jobs/emails', api.SpanStatusCode.ERROR, 'settle'],
    ]);
    expect(spans[0]!.attributes['messaging.batch.message_count']).toBe(2);
  });
});
