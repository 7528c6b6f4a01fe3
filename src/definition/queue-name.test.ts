import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { defineTable, Queue } from './define-table.js';

const table = defineTable({ table: 'jobs', id: 'id', group: 'queue', payload: 'payload' });

describe('queue names', () => {
  it.each([
    ['', /the queue name must be a non-empty string, got an empty one/],
    ['wel\u0000come', /the queue name "wel\\u0000come" contains a NUL character or an unpaired surrogate/],
    ['welcome\uD83D', /contains a NUL character or an unpaired surrogate/],
    ['\uDE00welcome', /contains a NUL character or an unpaired surrogate/],
    ['x'.repeat(256), /the queue name is 256 characters long; the group column holds at most 255/],
    ['😀'.repeat(256), /the queue name is 256 characters long/],
  ])('refuses a name the group column cannot store unchanged: %j', (name, message) => {
    expect(() => table.queue(name)).toThrow(DeclarationError);
    expect(() => table.queue(name)).toThrow(message);
  });

  it('refuses such a name however the queue is made', () => {
    expect(() => new Queue(table, 'a\u0000b')).toThrow(DeclarationError);
    expect(() => table.queue(42 as unknown as string)).toThrow(/must be a non-empty string, got 42/);
  });

  it('counts characters, not UTF-16 units, as the column does', () => {
    expect(table.queue('😀'.repeat(255)).name).toBe('😀'.repeat(255));
    expect(table.queue('x'.repeat(255)).name).toHaveLength(255);
    expect(table.queue(' spaced and ünïcode ').name).toBe(' spaced and ünïcode ');
  });
});
