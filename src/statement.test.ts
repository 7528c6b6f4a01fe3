import { describe, expect, it } from 'vitest';
import { bindRepeated, type Statement } from './statement.js';

describe('bindRepeated', () => {
  const statement: Statement = {
    name: 'lease.settleMany.retryAfter',
    sql: 'UPDATE t SET due = CASE id WHEN ? THEN ? WHEN ? THEN ? END WHERE ((id = ? AND l = ?) OR (id = ? AND l = ?)) AND n = ?',
    params: ['id', 'retryAfterAt', 'id', 'retryAfterAt', 'id', 'held', 'id', 'held', 'now'],
  };

  it('gives occurrence k of a row parameter to row k modulo the row count, and shared values as they are', () => {
    const rows = [
      { id: 1, held: 'a', retryAfterAt: 'x' },
      { id: 2, held: 'b', retryAfterAt: 'y' },
    ];
    expect(bindRepeated(statement, rows, { now: 'now' }, 'held').values).toEqual([1, 'x', 2, 'y', 1, 'a', 2, 'b', 'now']);
  });

  it('pads a short list with its last row', () => {
    expect(bindRepeated(statement, [{ id: 1, held: 'a', retryAfterAt: 'x' }], { now: 'now' }, 'held').values).toEqual([
      1, 'x', 1, 'x', 1, 'a', 1, 'a', 'now',
    ]);
  });

  it('counts rows by the parameter it is told to, for statements that repeat only the id', () => {
    const finishMany: Statement = {
      name: 'rowLock.finishMany',
      sql: 'DELETE FROM t WHERE id IN (?, ?, ?, ?) AND n = ?',
      params: ['id', 'id', 'id', 'id', 'now'],
    };
    expect(bindRepeated(finishMany, [{ id: 1 }, { id: 2 }, { id: 3 }], { now: 'now' }, 'id').values).toEqual([1, 2, 3, 3, 'now']);
  });

  it('refuses a statement whose shared parameter has no value', () => {
    expect(() => bindRepeated(statement, [{ id: 1, held: 'a' }], {}, 'held')).toThrow(/needs a value for parameter "now"/);
  });
});
