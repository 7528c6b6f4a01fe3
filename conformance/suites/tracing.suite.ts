import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Message } from '../../src/index.js';
import { Collector, createBroker, createTable, formsOf, jobsTable, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

function ofOperation(spans: readonly ReadableSpan[], type: string): ReadableSpan[] {
  return spans.filter((span) => span.attributes['messaging.operation.type'] === type);
}

function only(spans: readonly ReadableSpan[]): ReadableSpan {
  expect(spans).toHaveLength(1);
  return spans[0]!;
}

/** OpenTelemetry spans from publish to handler and settle, with an SDK registered for each test. */
export function tracingSuite(context: SuiteContext): void {
  const { stand } = context;
  describe('tracing', () => {
    let exporter: InMemorySpanExporter;
    let provider: BasicTracerProvider;
    beforeEach(() => {
      exporter = new InMemorySpanExporter();
      provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
      trace.setGlobalTracerProvider(provider);
    });
    afterEach(async () => {
      trace.disable();
      await provider.shutdown();
    });

    for (const form of formsOf(stand)) {
      it(`${form}: the handler's consumer span continues the producer's trace, with claim and settle spans`, async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const queue = table.queue('emails');
        const broker = createBroker(context.db, context.brokers);
        const received = new Collector<Message<unknown>>();
        broker.subscribe(queue, (message) => {
          received.push(message);
        });
        await broker.start();
        const id = await broker.publish(queue, { n: 1 }, { headers: { kept: 'yes' } });
        const [message] = await received.waitFor(1);
        await untilStats(broker, queue, (stats) => stats.acked === 1, 'the ack');
        await broker.stop();

        const spans = exporter.getFinishedSpans();
        const producer = only(ofOperation(spans, 'send'));
        expect(producer.kind).toBe(SpanKind.PRODUCER);
        expect(producer.name).toBe('publish jobs/emails');
        expect(producer.attributes).toMatchObject({
          'messaging.system': 'tablequeue',
          'messaging.destination.name': 'jobs/emails',
          'messaging.operation.name': 'publish',
          'messaging.message.id': id,
        });
        const { traceId, spanId } = producer.spanContext();
        expect(message!.headers).toEqual({ kept: 'yes', traceparent: `00-${traceId}-${spanId}-01` });

        const consumer = only(ofOperation(spans, 'process'));
        expect(consumer.kind).toBe(SpanKind.CONSUMER);
        expect(consumer.spanContext().traceId).toBe(traceId);
        expect(consumer.parentSpanContext?.spanId).toBe(spanId);
        expect(consumer.attributes).toMatchObject({ 'messaging.system': 'tablequeue', 'messaging.message.id': id });
        expect(consumer.status.code).toBe(SpanStatusCode.UNSET);

        const settle = only(ofOperation(spans, 'settle'));
        expect(settle.spanContext().traceId).toBe(traceId);
        expect(settle.parentSpanContext?.spanId).toBe(consumer.spanContext().spanId);
        expect(settle.attributes).toMatchObject({ 'messaging.message.id': id, 'tablequeue.outcome': 'ack' });

        const claims = ofOperation(spans, 'receive');
        expect(claims.every((span) => span.kind === SpanKind.CLIENT && span.name === 'claim jobs/emails')).toBe(true);
        expect(claims.filter((span) => span.attributes['messaging.batch.message_count'] === 1)).toHaveLength(1);
      });
    }

    it('a handler that throws gets an error status and the exception recorded', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      broker.on('error', () => undefined);
      broker.subscribe(
        queue,
        (message) => {
          if (message.attempt === 1) throw new Error('first attempt fails');
        },
        { retryBackoff: { initialMs: 10 } },
      );
      await broker.start();
      await broker.publish(queue, { n: 1 });
      await untilStats(broker, queue, (stats) => stats.acked === 1, 'the second attempt');
      await broker.stop();

      const spans = exporter.getFinishedSpans();
      const traceId = only(ofOperation(spans, 'send')).spanContext().traceId;
      const consumers = ofOperation(spans, 'process');
      expect(consumers.map((span) => span.spanContext().traceId)).toEqual([traceId, traceId]);
      const [failed, succeeded] = consumers;
      expect(failed!.status).toEqual({ code: SpanStatusCode.ERROR, message: 'first attempt fails' });
      const exception = failed!.events.find((event) => event.name === 'exception');
      expect(exception?.attributes?.['exception.message']).toBe('first attempt fails');
      expect(succeeded!.status.code).toBe(SpanStatusCode.UNSET);
      expect(ofOperation(spans, 'settle').map((span) => span.attributes['tablequeue.outcome'])).toEqual(['retryAfter', 'ack']);
    });

    it('a batch handler span links to the producer of each message', async () => {
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const handled = new Collector<number>();
      broker.subscribe(
        queue,
        (messages) => {
          for (const message of messages) handled.push(message.attempt);
        },
        { batch: 3 },
      );
      await broker.start();
      await broker.publishMany(queue, [{ payload: 1 }, { payload: 2 }, { payload: 3 }]);
      await handled.waitFor(3);
      await untilStats(broker, queue, (stats) => stats.acked === 3, 'the acks');
      await broker.stop();

      const spans = exporter.getFinishedSpans();
      const producer = only(ofOperation(spans, 'send'));
      expect(producer.attributes['messaging.batch.message_count']).toBe(3);
      const links = ofOperation(spans, 'process').flatMap((span) => span.links);
      expect(links).toHaveLength(3);
      for (const link of links) expect(link.context.spanId).toBe(producer.spanContext().spanId);
    });

    it('without a registered SDK nothing is traced and no header is added', async () => {
      trace.disable();
      const table = jobsTable({ form: 'lease' });
      await createTable(stand, context.db, table);
      const queue = table.queue('emails');
      const broker = createBroker(context.db, context.brokers);
      const received = new Collector<Message<unknown>>();
      broker.subscribe(queue, (message) => {
        received.push(message);
      });
      await broker.start();
      await broker.publish(queue, { n: 1 }, { headers: { only: 'this' } });
      const [message] = await received.waitFor(1);
      await broker.stop();
      expect(message!.headers).toEqual({ only: 'this' });
      expect(exporter.getFinishedSpans()).toEqual([]);
    });
  });
}
