import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import { DeclarationError } from '../errors.js';
import { createMaintenanceTableSql } from './maintenance-table.js';
import { resolveRetentionDeclaration, type RetainOptions } from './retention-options.js';

const jobs = defineTable({ table: 'jobs', id: 'id', group: 'queue', retryAfter: 'retry_after', processedAt: 'processed_at' });
const DAY_MS = 86_400_000;

function refusal(options: RetainOptions, table = jobs): string {
  try {
    resolveRetentionDeclaration(table, options);
  } catch (error) {
    expect(error).toBeInstanceOf(DeclarationError);
    return (error as Error).message;
  }
  throw new Error('expected a DeclarationError');
}

describe('retain options', () => {
  it('takes the defaults: batches of 1,000, 50 ms apart, a run a minute, processed rows first', () => {
    const declaration = resolveRetentionDeclaration(jobs, {
      deadLettersForMs: 30 * DAY_MS,
      deadLetters: { group: 'failed' },
      processedForMs: 7 * DAY_MS,
    });
    expect(declaration).toMatchObject({
      targets: [
        { target: { kind: 'processed' }, olderThanMs: 7 * DAY_MS },
        { target: { kind: 'deadLetter', destination: { kind: 'group', group: 'failed' } }, olderThanMs: 30 * DAY_MS },
      ],
      batchSize: 1_000,
      pauseMs: 50,
      intervalMs: 60_000,
      maintenanceTable: 'tablequeue_maintenance',
    });
    expect(resolveRetentionDeclaration(jobs, { deadLettersForMs: DAY_MS, deadLetters: { table: 'ops.failed_jobs' } }).targets).toEqual([
      { target: { kind: 'deadLetter', destination: { kind: 'table', schema: 'ops', name: 'failed_jobs' } }, olderThanMs: DAY_MS },
    ]);
  });

  it('takes dedupeWindows alone, for a table that deletes its rows as they finish, or beside the ages', () => {
    const bare = defineTable({ table: 'jobs', id: 'id' });
    expect(resolveRetentionDeclaration(bare, { dedupeWindows: true })).toMatchObject({ targets: [], dedupeWindows: true });
    expect(resolveRetentionDeclaration(jobs, { processedForMs: DAY_MS })).toMatchObject({ dedupeWindows: false });
  });

  it('says what to fix', () => {
    expect(refusal({})).toBe(
      'broker.retain(jobs): say what to delete: processedForMs, deadLettersForMs (with deadLetters), dedupeWindows: true, or several of them',
    );
    expect(refusal({ dedupeWindows: false })).toMatch(/say what to delete/);
    expect(refusal({ dedupeWindows: 'yes' } as never)).toBe('broker.retain(jobs): dedupeWindows is true or false, got yes');
    expect(refusal({ deadLettersForMs: DAY_MS })).toBe(
      "broker.retain(jobs): deadLettersForMs needs deadLetters, where they are: { group: 'failed' } or { table: 'failed_jobs' }",
    );
    expect(refusal({ processedForMs: DAY_MS, deadLetters: { group: 'failed' } })).toBe(
      'broker.retain(jobs): deadLetters says where dead letters are, but deadLettersForMs, how long to keep them, is missing',
    );
    expect(refusal({ deadLettersForMs: DAY_MS, deadLetters: { group: 'a', table: 'b' } as never })).toBe(
      "broker.retain(jobs): deadLetters is { group: 'failed' } or { table: 'failed_jobs' }, one of the two",
    );
    expect(refusal({ processedForMs: 0 })).toBe('broker.retain(jobs): processedForMs must be a whole number of at least 1, got 0');
    expect(refusal({ processedForMs: DAY_MS, batchSize: 20_000 })).toBe(
      'broker.retain(jobs): batchSize must be a whole number from 1 to 10000, got 20000',
    );
    expect(refusal({ processedForMs: DAY_MS, keepFor: 1 } as never)).toMatch(/unknown option "keepFor"; the options are processedForMs, /);
    const bare = defineTable({ table: 'jobs', id: 'id' });
    expect(refusal({ processedForMs: DAY_MS }, bare)).toMatch(/has no processedAt column, so processed rows are deleted at once/);
    expect(refusal({ deadLettersForMs: DAY_MS, deadLetters: { table: 'failed_jobs' } }, bare)).toMatch(/has no retryAfter column/);
  });

  it('renders the maintenance table for a migration', () => {
    expect(createMaintenanceTableSql('postgres', 'ops.maintenance')).toBe(
      [
        'CREATE TABLE IF NOT EXISTS "ops"."maintenance" (',
        '  "task" text NOT NULL PRIMARY KEY,',
        '  "holder" text NOT NULL,',
        '  "locked_until" timestamptz NOT NULL',
        ')',
      ].join('\n'),
    );
  });
});
