import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import {
  EARLIEST_STORABLE_TIME_MS,
  isStorableTime,
  LATEST_STORABLE_TIME_MS,
  MAX_PRIORITY,
  MAX_QUEUE_NAME_CHARACTERS,
  MIN_PRIORITY,
} from './storable-values.js';

const table = defineTable({ table: 'jobs', id: 'id', group: 'queue', priority: 'priority', payload: 'payload' });

describe('storable values', () => {
  it('match the columns createTableSql declares', () => {
    expect([MIN_PRIORITY, MAX_PRIORITY]).toEqual([-(2 ** 15), 2 ** 15 - 1]);
    for (const dialect of ['postgres', 'mysql', 'mariadb'] as const) {
      expect(table.createTableSql(dialect)[0], dialect).toMatch(/["`]priority["`] SMALLINT /);
    }
    for (const dialect of ['mysql', 'mariadb'] as const) {
      expect(table.createTableSql(dialect)[0], dialect).toMatch(new RegExp(`\`queue\` VARCHAR\\(${MAX_QUEUE_NAME_CHARACTERS}\\)`));
    }
  });

  it('are instants from the first moment of year 1 to the last of year 9999', () => {
    expect(new Date(EARLIEST_STORABLE_TIME_MS).toISOString()).toBe('0001-01-01T00:00:00.000Z');
    expect(new Date(LATEST_STORABLE_TIME_MS).toISOString()).toBe('9999-12-31T23:59:59.999Z');
    expect(isStorableTime(EARLIEST_STORABLE_TIME_MS)).toBe(true);
    expect(isStorableTime(LATEST_STORABLE_TIME_MS)).toBe(true);
    expect(isStorableTime(EARLIEST_STORABLE_TIME_MS - 1)).toBe(false);
    expect(isStorableTime(LATEST_STORABLE_TIME_MS + 1)).toBe(false);
    expect(isStorableTime(Number.NaN)).toBe(false);
  });
});
