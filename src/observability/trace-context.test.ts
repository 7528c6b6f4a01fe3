import { describe, expect, it } from 'vitest';
import { formatTraceParent, parseTraceParent } from './trace-context.js';

const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const spanId = '00f067aa0ba902b7';

describe('traceparent', () => {
  it('writes version 00 with two hex digits of flags, and reads it back', () => {
    const header = formatTraceParent({ traceId, spanId, traceFlags: 1 });
    expect(header).toBe(`00-${traceId}-${spanId}-01`);
    expect(parseTraceParent(header)).toEqual({ traceId, spanId, traceFlags: 1 });
    expect(parseTraceParent(`00-${traceId}-${spanId}-00`)?.traceFlags).toBe(0);
  });

  it('refuses what the specification calls invalid', () => {
    expect(parseTraceParent(undefined)).toBeUndefined();
    expect(parseTraceParent('')).toBeUndefined();
    expect(parseTraceParent(`ff-${traceId}-${spanId}-01`)).toBeUndefined();
    expect(parseTraceParent(`00-${'0'.repeat(32)}-${spanId}-01`)).toBeUndefined();
    expect(parseTraceParent(`00-${traceId}-${'0'.repeat(16)}-01`)).toBeUndefined();
    expect(parseTraceParent(`00-${traceId.toUpperCase()}-${spanId}-01`)).toBeUndefined();
    expect(parseTraceParent(`00-${traceId}-${spanId}-01-extra`)).toBeUndefined();
    expect(parseTraceParent(`00-${traceId}-${spanId}`)).toBeUndefined();
  });

  it('reads the known fields of a later version and ignores what follows them', () => {
    expect(parseTraceParent(`01-${traceId}-${spanId}-01-future`)).toEqual({ traceId, spanId, traceFlags: 1 });
  });
});
