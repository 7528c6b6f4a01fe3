import { describe, expect, it } from 'vitest';
import { fnv1a32 } from './fnv1a.js';

describe('fnv1a32', () => {
  it('gives the published 32-bit FNV-1a values', () => {
    // Test vectors of the FNV reference: the offset basis for no input, then "a" and "foobar".
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('hashes the UTF-8 bytes of the text, not its UTF-16 code units', () => {
    // "é" is the two bytes C3 A9 in UTF-8 (one code unit, E9, in UTF-16).
    expect(fnv1a32('é')).toBe(0x1e9de8c1);
  });
});
