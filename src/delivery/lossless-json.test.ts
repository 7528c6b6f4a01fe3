import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { describeLossyJson, isLosslessJson } from './lossless-json.js';

class Point {
  constructor(
    readonly x: number,
    readonly y: number,
  ) {}
}

/** An array with a hole (JSON writes null there), without a sparse literal. */
function holeAt(index: number, items: number[]): number[] {
  const sparse = [...items];
  delete sparse[index];
  return sparse;
}

describe('lossless JSON', () => {
  it('keeps every value JSON carries unchanged, and values whose class chose their JSON form', () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => isLosslessJson(value)));
    expect(isLosslessJson({ at: new Date(), nested: [{ when: new Date(0) }] })).toBe(true);
    expect(isLosslessJson(Object.assign(Object.create(null) as object, { a: 1 }))).toBe(true);
    expect(isLosslessJson({ optional: undefined, kept: 1 })).toBe(true);
    expect(isLosslessJson(-0)).toBe(true);
  });

  it.each([
    [Number.NaN, 'payload: NaN'],
    [{ price: Number.POSITIVE_INFINITY }, 'payload.price: Infinity'],
    [{ list: [1, undefined] }, 'payload.list[1]: undefined'],
    [{ list: holeAt(1, [1, 2, 3]) }, 'payload.list[1]: undefined'],
    [new Map([['a', 1]]), 'payload: an instance of Map, not a plain object'],
    [{ tags: new Set(['a']) }, 'payload.tags: an instance of Set, not a plain object'],
    [{ where: new Point(1, 2) }, 'payload.where: an instance of Point, not a plain object'],
    [{ 'odd key': { run: () => 1 } }, 'payload["odd key"].run: function'],
    [{ id: Symbol('id') }, 'payload.id: symbol'],
    [{ size: 10n }, 'payload.size: bigint'],
    [{ at: new Date(Number.NaN) }, 'payload.at: an invalid Date'],
    [{ bytes: new Uint8Array([1]) }, 'payload.bytes: an instance of Uint8Array, not a plain object'],
    [{ failure: new Error('boom') }, 'payload.failure: an instance of Error, not a plain object'],
  ])('refuses what JSON would change: %s', (value, description) => {
    expect(isLosslessJson(value)).toBe(false);
    expect(describeLossyJson(value, 'payload')).toBe(description);
  });

  it('walks nesting deeper than the call stack allows recursion', () => {
    let deep: unknown = 1;
    for (let depth = 0; depth < 100_000; depth += 1) deep = [deep];
    expect(isLosslessJson(deep)).toBe(true);
  });
});
