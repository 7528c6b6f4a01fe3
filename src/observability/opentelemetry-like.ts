/**
 * The subset of `@opentelemetry/api` tablequeue uses, described structurally. The package is an
 * optional peer dependency: naming its types here instead of importing them keeps them out of the
 * published declarations, which a project without the package then still compiles against (with
 * `skipLibCheck` off, TypeScript's default, an import of a missing module there is an error).
 */

export type OpenTelemetryAttributeValue = string | number | boolean | readonly (string | number | boolean | null | undefined)[];

export type OpenTelemetryAttributes = Record<string, OpenTelemetryAttributeValue | undefined>;

/** An immutable context: the span it carries is read and set through `trace`. */
export interface OpenTelemetryContextLike {
  getValue(key: symbol): unknown;
  setValue(key: symbol, value: unknown): OpenTelemetryContextLike;
  deleteValue(key: symbol): OpenTelemetryContextLike;
}

export interface OpenTelemetryTraceStateLike {
  serialize(): string;
}

export interface OpenTelemetrySpanContextLike {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: OpenTelemetryTraceStateLike;
}

export interface OpenTelemetryLinkLike {
  context: OpenTelemetrySpanContextLike;
  attributes?: OpenTelemetryAttributes;
}

export interface OpenTelemetrySpanLike {
  spanContext(): OpenTelemetrySpanContextLike;
  setAttribute(key: string, value: OpenTelemetryAttributeValue): unknown;
  recordException(exception: Error | string): void;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

export interface OpenTelemetrySpanOptionsLike {
  kind?: number;
  attributes?: OpenTelemetryAttributes;
  links?: OpenTelemetryLinkLike[];
}

export interface OpenTelemetryTracerLike {
  startSpan(name: string, options?: OpenTelemetrySpanOptionsLike, context?: OpenTelemetryContextLike): OpenTelemetrySpanLike;
}

export interface OpenTelemetryTracerProviderLike {
  getTracer(name: string): OpenTelemetryTracerLike;
}

/** The module's namespace: `await import('@opentelemetry/api')`. */
export interface OpenTelemetryApiLike {
  readonly trace: {
    getTracerProvider(): OpenTelemetryTracerProviderLike;
    setSpan(context: OpenTelemetryContextLike, span: OpenTelemetrySpanLike): OpenTelemetryContextLike;
    setSpanContext(context: OpenTelemetryContextLike, spanContext: OpenTelemetrySpanContextLike): OpenTelemetryContextLike;
  };
  readonly context: {
    active(): OpenTelemetryContextLike;
    with<Result>(context: OpenTelemetryContextLike, run: () => Result): Result;
  };
  readonly SpanKind: { readonly PRODUCER: number; readonly CLIENT: number; readonly CONSUMER: number };
  readonly SpanStatusCode: { readonly ERROR: number };
  readonly ROOT_CONTEXT: OpenTelemetryContextLike;
  isSpanContextValid(spanContext: OpenTelemetrySpanContextLike): boolean;
  createTraceState(serialized: string): OpenTelemetryTraceStateLike;
}
