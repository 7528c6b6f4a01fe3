import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DecodeError, EncodeError } from '../errors.js';
import {
  decodeHeaders,
  decodeJsonPayload,
  encodeHeaders,
  encodePayload,
  requirePayloadSize,
  requireStorableText,
} from './codec.js';

describe('codec', () => {
  it('round-trips every JSON value through the payload bytes', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(JSON.stringify(decodeJsonPayload(encodePayload(value, 'test')))).toBe(JSON.stringify(value));
      }),
    );
  });

  it('stores bytes as they are', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), (bytes) => {
        expect(Buffer.compare(encodePayload(bytes, 'test'), Buffer.from(bytes))).toBe(0);
      }),
    );
  });

  it('refuses values with no JSON form before anything is written', () => {
    expect(() => encodePayload(10n, 'publish')).toThrow(EncodeError);
    expect(() => encodePayload(undefined, 'publish')).toThrow(/no JSON form/);
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(() => encodePayload(cyclic, 'publish')).toThrow(EncodeError);
  });

  it('refuses a payload JSON would change, saying where, before anything is written', () => {
    expect(() => encodePayload(Number.NaN, 'publish to "jobs"')).toThrow(
      'publish to "jobs": the payload would not come back as it was sent, since JSON changes payload: NaN; ' +
        'send plain objects, arrays, strings, finite numbers, booleans and null (or bytes with a decoder of your own); nothing was written',
    );
    expect(() => encodePayload({ total: Number.POSITIVE_INFINITY }, 'publish')).toThrow(/payload.total: Infinity/);
    expect(() => encodePayload(new Map([['a', 1]]), 'publish')).toThrow(EncodeError);
    expect(() => encodePayload({ seen: new Set([1]) }, 'publish')).toThrow(/payload.seen: an instance of Set/);
    expect(() => encodePayload({ onDone: () => undefined }, 'publish')).toThrow(/payload.onDone: function/);
    expect(() => encodePayload([undefined], 'publish')).toThrow(/payload\[0\]: undefined/);
  });

  it('keeps dates, undefined properties and bytes of any content', () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    expect(decodeJsonPayload(encodePayload({ at, note: undefined }, 'publish'))).toEqual({ at: at.toISOString() });
    expect([...encodePayload(Buffer.from([0xff, 0xfe, 0xc3, 0x28]), 'publish')]).toEqual([0xff, 0xfe, 0xc3, 0x28]);
  });

  it('fails to decode bytes that are not UTF-8 JSON with a DecodeError', () => {
    expect(() => decodeJsonPayload(Buffer.from([0xff, 0xfe]))).toThrow(DecodeError);
    expect(() => decodeJsonPayload(Buffer.from('{"open": '))).toThrow(DecodeError);
    expect(() => decodeJsonPayload(Buffer.alloc(0))).toThrow(DecodeError);
  });

  it('round-trips headers, including names such as __proto__', () => {
    const storable = fc.string({ unit: 'grapheme' }).filter((text) => !text.includes('\u0000'));
    fc.assert(
      fc.property(fc.dictionary(storable, storable), (headers) => {
        expect(decodeHeaders(encodeHeaders(headers, 'test'))).toEqual(headers);
      }),
    );
    const tricky = JSON.parse('{"__proto__":"x","constructor":"y"}') as Record<string, string>;
    expect(Object.keys(decodeHeaders(encodeHeaders(tricky, 'test')))).toEqual(['__proto__', 'constructor']);
  });

  it('refuses text a column cannot store unchanged: NUL and unpaired surrogates', () => {
    expect(() => requireStorableText('a\u0000b', 'partitionKey', 'publish')).toThrow(EncodeError);
    expect(() => requireStorableText('\uD800', 'partitionKey', 'publish')).toThrow(/unpaired surrogate/);
    expect(() => requireStorableText('x\uDC00', 'partitionKey', 'publish')).toThrow(EncodeError);
    expect(() => requireStorableText('😀 emoji and ünïcode', 'partitionKey', 'publish')).not.toThrow();
    expect(() => encodeHeaders({ trace: 'a\u0000' }, 'publish')).toThrow(EncodeError);
    expect(() => encodeHeaders({ count: 1 as unknown as string }, 'publish')).toThrow(/must be a string/);
  });

  it('refuses headers that are not a plain object, and keeps those that are', () => {
    class Headers {
      trace = 'abc';
    }
    for (const headers of [new Map([['trace', 'abc']]), ['abc'], new Headers()]) {
      expect(() => encodeHeaders(headers as unknown as Record<string, string>, 'publish')).toThrow(
        /publish: headers must be a plain object of strings/,
      );
    }
    const bare = Object.assign(Object.create(null) as Record<string, string>, { trace: 'abc' });
    expect(decodeHeaders(encodeHeaders(bare, 'publish'))).toEqual({ trace: 'abc' });
  });

  it('refuses an oversized payload with the sizes in the message', () => {
    expect(() => requirePayloadSize(Buffer.alloc(11), 10, 'publish to "jobs"')).toThrow(
      'publish to "jobs": the payload is 11 bytes, over the limit of 10 (broker option maxPayloadBytes); nothing was written',
    );
    expect(requirePayloadSize(Buffer.alloc(10), 10, 'x').byteLength).toBe(10);
  });
});
