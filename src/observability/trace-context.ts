/**
 * W3C Trace Context (`traceparent`, `tracestate`) as message headers: what a producer span writes
 * into a row's headers and a consumer span reads back. Pure text, no OpenTelemetry types, so a
 * consumer in any language that reads the headers column sees the standard header.
 */

export const TRACEPARENT_HEADER = 'traceparent';
export const TRACESTATE_HEADER = 'tracestate';

export interface TraceParent {
  /** 32 lower-case hex digits, not all zero. */
  readonly traceId: string;
  /** 16 lower-case hex digits, not all zero. */
  readonly spanId: string;
  /** Bit 0 is "sampled". */
  readonly traceFlags: number;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/** Version 00, the only version this writes. */
export function formatTraceParent(parent: TraceParent): string {
  return `00-${parent.traceId}-${parent.spanId}-${(parent.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * Reads a `traceparent` header; undefined when it is absent or not valid. Version ff is invalid,
 * version 00 has exactly four fields, and a later version may add fields after a dash, which are
 * ignored as the specification asks.
 */
export function parseTraceParent(header: string | undefined): TraceParent | undefined {
  if (header === undefined) return undefined;
  const match = TRACEPARENT.exec(header.trim());
  if (match === null) return undefined;
  const [, version, traceId, spanId, flags, rest] = match;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE_ID || spanId === ZERO_SPAN_ID) return undefined;
  return { traceId: traceId!, spanId: spanId!, traceFlags: Number.parseInt(flags!, 16) };
}
