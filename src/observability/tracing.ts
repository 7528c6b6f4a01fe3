import type { Message } from '../delivery/message.js';
import type {
  OpenTelemetryApiLike,
  OpenTelemetryAttributes,
  OpenTelemetryContextLike,
  OpenTelemetryLinkLike,
  OpenTelemetrySpanContextLike,
  OpenTelemetrySpanLike,
  OpenTelemetryTracerLike,
  OpenTelemetryTracerProviderLike,
} from './opentelemetry-like.js';
import {
  formatTraceParent,
  parseTraceParent,
  TRACEPARENT_HEADER,
  TRACESTATE_HEADER,
} from './trace-context.js';

type Api = OpenTelemetryApiLike;
type Attributes = OpenTelemetryAttributes;
type Context = OpenTelemetryContextLike;
type Span = OpenTelemetrySpanLike;
type Tracer = OpenTelemetryTracerLike;

export const TRACER_NAME = 'tablequeue';

/** Messaging semantic-convention attribute names, and the value of `messaging.system`. */
export const MESSAGING = {
  system: 'messaging.system',
  destination: 'messaging.destination.name',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  messageId: 'messaging.message.id',
  batchCount: 'messaging.batch.message_count',
  systemName: 'tablequeue',
} as const;

/** Attributes of our own, where the conventions have no name. */
export const TABLEQUEUE_ATTRIBUTES = {
  attempt: 'tablequeue.message.attempt',
  outcome: 'tablequeue.outcome',
} as const;

/**
 * Loads `@opentelemetry/api` (an optional peer dependency) and returns a tracer only when an SDK
 * registered a tracer provider: without one every call would be a no-op, so the broker skips
 * tracing altogether instead of paying for no-op spans per message. Register the SDK before
 * `broker.start()`.
 */
export async function loadTracing(): Promise<Tracing | undefined> {
  let api: Api;
  try {
    api = await import('@opentelemetry/api');
  } catch {
    return undefined;
  }
  // The global provider is a proxy until an SDK registers; its delegate tracer says whether one did.
  const provider = api.trace.getTracerProvider() as OpenTelemetryTracerProviderLike & {
    getDelegateTracer?: (name: string) => Tracer | undefined;
  };
  const tracer = provider.getDelegateTracer === undefined ? provider.getTracer(TRACER_NAME) : provider.getDelegateTracer(TRACER_NAME);
  return tracer === undefined ? undefined : new Tracing(api, tracer);
}

/** The broker's spans: a producer span per publish, and the spans of each subscription. */
export class Tracing {
  readonly #api: Api;
  readonly #tracer: Tracer;

  constructor(api: Api, tracer: Tracer) {
    this.#api = api;
    this.#tracer = tracer;
  }

  /**
   * A producer span around a publish of `messageCount` rows to `destination`. `write` gets the
   * headers that carry the span's context (`traceparent`, and `tracestate` when there is one)
   * and runs with the span active; `idOf` names the message when one row was written.
   */
  async publish<T>(
    destination: string,
    messageCount: number,
    write: (traceHeaders: Record<string, string>) => Promise<T>,
    idOf: (result: T) => string | undefined,
  ): Promise<T> {
    const api = this.#api;
    const attributes: Attributes = operation(destination, 'send', 'publish');
    if (messageCount !== 1) attributes[MESSAGING.batchCount] = messageCount;
    const parent = api.context.active();
    const span = this.#tracer.startSpan(`publish ${destination}`, { kind: api.SpanKind.PRODUCER, attributes }, parent);
    try {
      const result = await api.context.with(api.trace.setSpan(parent, span), () => write(traceHeaders(api, span)));
      const id = idOf(result);
      if (id !== undefined) span.setAttribute(MESSAGING.messageId, id);
      return result;
    } catch (error) {
      fail(api, span, error);
      throw error;
    } finally {
      span.end();
    }
  }

  forSubscription(destination: string): SubscriptionTracing {
    return new SubscriptionTracing(this.#api, this.#tracer, destination);
  }
}

/** A consumer span around one handler call; settle spans are its children. */
export interface ProcessSpan {
  readonly context: Context;
  /** Runs the handler with this span active, so spans the handler starts are its children. */
  run<T>(handler: () => T): T;
  /** The handler threw: error status and the exception recorded. */
  fail(error: unknown): void;
  end(): void;
}

/** The claim, process and settle spans of one subscription; destination attributes built once. */
export class SubscriptionTracing {
  readonly #api: Api;
  readonly #tracer: Tracer;
  readonly #destination: string;
  readonly #names: { readonly claim: string; readonly process: string; readonly settle: string };

  constructor(api: Api, tracer: Tracer, destination: string) {
    this.#api = api;
    this.#tracer = tracer;
    this.#destination = destination;
    this.#names = { claim: `claim ${destination}`, process: `process ${destination}`, settle: `settle ${destination}` };
  }

  /** A client span around one claim, a root of its own: it counts the rows it took. */
  async claim<T extends readonly unknown[]>(run: () => Promise<T>): Promise<T> {
    const api = this.#api;
    const span = this.#tracer.startSpan(
      this.#names.claim,
      { kind: api.SpanKind.CLIENT, attributes: operation(this.#destination, 'receive', 'claim') },
      api.ROOT_CONTEXT,
    );
    try {
      const rows = await run();
      span.setAttribute(MESSAGING.batchCount, rows.length);
      return rows;
    } catch (error) {
      fail(api, span, error);
      throw error;
    } finally {
      span.end();
    }
  }

  /**
   * A consumer span for one handler call. One message: its parent is the producer's context
   * read from the message's headers. A batch: a link to each message's producer context.
   */
  startProcess(messages: readonly Message<unknown>[]): ProcessSpan {
    const api = this.#api;
    const attributes = operation(this.#destination, 'process', 'process');
    let parent = api.ROOT_CONTEXT;
    let links: OpenTelemetryLinkLike[] | undefined;
    if (messages.length === 1) {
      const message = messages[0]!;
      attributes[MESSAGING.messageId] = message.id;
      attributes[TABLEQUEUE_ATTRIBUTES.attempt] = message.attempt;
      const producer = producerContext(api, message.headers);
      if (producer !== undefined) parent = api.trace.setSpanContext(api.ROOT_CONTEXT, producer);
    } else {
      attributes[MESSAGING.batchCount] = messages.length;
      links = [];
      for (const message of messages) {
        const producer = producerContext(api, message.headers);
        if (producer !== undefined) links.push({ context: producer, attributes: { [MESSAGING.messageId]: message.id } });
      }
    }
    const span = this.#tracer.startSpan(this.#names.process, { kind: api.SpanKind.CONSUMER, attributes, links }, parent);
    const context = api.trace.setSpan(parent, span);
    return {
      context,
      run: (handler) => api.context.with(context, handler),
      fail: (error) => fail(api, span, error),
      end: () => span.end(),
    };
  }

  /** A client span around one settlement, child of the handler's span when there was one. */
  async settle<T>(parent: ProcessSpan | undefined, messageId: string, outcome: string, run: () => Promise<T>): Promise<T> {
    const api = this.#api;
    const attributes = operation(this.#destination, 'settle', 'settle');
    attributes[MESSAGING.messageId] = messageId;
    attributes[TABLEQUEUE_ATTRIBUTES.outcome] = outcome;
    const span = this.#tracer.startSpan(
      this.#names.settle,
      { kind: api.SpanKind.CLIENT, attributes },
      parent?.context ?? api.ROOT_CONTEXT,
    );
    try {
      return await run();
    } catch (error) {
      fail(api, span, error);
      throw error;
    } finally {
      span.end();
    }
  }
}

function operation(destination: string, type: string, name: string): Attributes {
  return {
    [MESSAGING.system]: MESSAGING.systemName,
    [MESSAGING.destination]: destination,
    [MESSAGING.operationType]: type,
    [MESSAGING.operationName]: name,
  };
}

/** The span's context as W3C headers; none when the span is not valid (a non-recording tracer). */
function traceHeaders(api: Api, span: Span): Record<string, string> {
  const spanContext = span.spanContext();
  const headers: Record<string, string> = {};
  if (!api.isSpanContextValid(spanContext)) return headers;
  const { traceId, spanId, traceFlags, traceState } = spanContext;
  headers[TRACEPARENT_HEADER] = formatTraceParent({ traceId, spanId, traceFlags });
  const state = traceState?.serialize();
  if (state !== undefined && state !== '') headers[TRACESTATE_HEADER] = state;
  return headers;
}

function producerContext(api: Api, headers: Readonly<Record<string, string>>): OpenTelemetrySpanContextLike | undefined {
  const parent = parseTraceParent(headers[TRACEPARENT_HEADER]);
  if (parent === undefined) return undefined;
  const state = headers[TRACESTATE_HEADER];
  return {
    ...parent,
    isRemote: true,
    traceState: state === undefined || state === '' ? undefined : api.createTraceState(state),
  };
}

function fail(api: Api, span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}
