import { describe, expect, it } from 'vitest';
import { indexColumnsOf } from './index-read.js';

describe('indexColumnsOf', () => {
  it('groups the rows by index, keeping the key columns in order and expressions as null', () => {
    const rows = [
      { index_name: 'a', column_name: 'queue' },
      { index_name: 'a', column_name: 'locked_until' },
      { index_name: 'b', column_name: null },
    ];
    expect(indexColumnsOf(rows)).toEqual(
      new Map([
        ['a', ['queue', 'locked_until']],
        ['b', [null]],
      ]),
    );
  });
});
