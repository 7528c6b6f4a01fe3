import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { createTableSpec, type TableDeclaration } from './table-spec.js';

function declarationError(declaration: unknown): DeclarationError {
  try {
    createTableSpec(declaration as TableDeclaration);
  } catch (error) {
    expect(error).toBeInstanceOf(DeclarationError);
    return error as DeclarationError;
  }
  throw new Error('expected a DeclarationError');
}

describe('createTableSpec', () => {
  it('needs only table and id, and picks the row lock form', () => {
    const spec = createTableSpec({ table: 'jobs', id: 'id' });
    expect(spec).toMatchObject({ name: 'jobs', qualifiedName: 'jobs', id: { column: 'id', generated: true }, form: 'rowLock' });
    expect(spec.group).toBeUndefined();
  });

  it('reads every role, with lockedUntil selecting the lease form', () => {
    const spec = createTableSpec({
      table: 'email_jobs',
      schema: 'app',
      id: { column: 'job_id', generated: false },
      group: { column: 'queue', fifo: true },
      priority: 'priority',
      partitionKey: 'customer',
      retryAfter: 'retry_after',
      attempt: 'attempt',
      processedAt: 'processed_at',
      lockedUntil: 'locked_until',
      headers: 'headers',
      payload: 'payload',
      isolation: 'read committed',
    });
    expect(spec.qualifiedName).toBe('app.email_jobs');
    expect(spec.form).toBe('lease');
    expect(spec.id).toEqual({ column: 'job_id', generated: false });
    expect(spec.group).toEqual({ column: 'queue', fifo: true });
    expect(Object.isFrozen(spec)).toBe(true);
  });

  it('takes a payload column of the JSON type as { column, json: true }, and a plain name as bytes', () => {
    expect(createTableSpec({ table: 'jobs', id: 'id', payload: 'data' })).toMatchObject({ payload: 'data', payloadHolds: 'bytes' });
    expect(createTableSpec({ table: 'jobs', id: 'id', payload: { column: 'data', json: true } })).toMatchObject({ payload: 'data', payloadHolds: 'json' });
    expect(createTableSpec({ table: 'jobs', id: 'id', payload: { column: 'data' } })).toMatchObject({ payload: 'data', payloadHolds: 'bytes' });
    expect(declarationError({ table: 'jobs', id: 'id', payload: { column: 'data', json: 'yes' } }).message).toMatch(/payload takes a column name or \{ column, json: true \}/);
    expect(declarationError({ table: 'jobs', id: 'id', payload: { column: 'data', type: 'jsonb' } }).message).toMatch(/payload takes a column name/);
    expect(declarationError({ table: 'jobs', id: 'id', payload: { json: true } }).message).toMatch(/payload column of table "jobs"/);
  });

  it('parses an advisory key template into literal and column parts', () => {
    const spec = createTableSpec({ table: 'jobs', id: 'id', advisoryLock: 'jobs-{id}:{customer}' });
    expect(spec.form).toBe('advisory');
    expect(spec.advisoryLock).toEqual([{ literal: 'jobs-' }, { column: 'id' }, { literal: ':' }, { column: 'customer' }]);
  });

  it('refuses an unknown role and lists the roles', () => {
    expect(declarationError({ table: 'jobs', id: 'id', lockedUntl: 'x' }).message).toMatch(/unknown role "lockedUntl".*lockedUntil/);
  });

  it('refuses two forms at once', () => {
    expect(declarationError({ table: 'jobs', id: 'id', lockedUntil: 'l', advisoryLock: 'k-{id}' }).message).toMatch(
      /both lockedUntil .* and advisoryLock/,
    );
  });

  it('refuses a key template naming no column, or with an unmatched brace', () => {
    expect(declarationError({ table: 'jobs', id: 'id', advisoryLock: 'global' }).message).toMatch(/names no column/);
    expect(declarationError({ table: 'jobs', id: 'id', advisoryLock: 'k-{id' }).message).toMatch(/unmatched brace/);
  });

  it('refuses a backslash or a NUL character in a key template, which becomes SQL text literals', () => {
    expect(declarationError({ table: 'jobs', id: 'id', advisoryLock: 'k\\{id}' }).message).toMatch(/backslash or a NUL/);
    expect(declarationError({ table: 'jobs', id: 'id', advisoryLock: '{id}\u0000' }).message).toMatch(/backslash or a NUL/);
    expect(createTableSpec({ table: 'jobs', id: 'id', advisoryLock: "it's-{id}" }).advisoryLock).toEqual([
      { literal: "it's-" },
      { column: 'id' },
    ]);
  });

  it('refuses identifiers over 64 characters instead of truncating them', () => {
    expect(declarationError({ table: 'j'.repeat(65), id: 'id' }).message).toMatch(/65 characters long/);
    expect(() => createTableSpec({ table: 'j'.repeat(64), id: 'id' })).not.toThrow();
  });

  it.each([
    'jobs; DROP TABLE users',
    'jobs"',
    'jobs`',
    "jobs'",
    'jobs --',
    'a b',
    '1jobs',
    '',
    'jobs\u0000',
  ])('refuses the hostile or malformed identifier %j', (name) => {
    expect(declarationError({ table: name, id: 'id' }).message).toMatch(/identifier|non-empty/);
    expect(declarationError({ table: 'jobs', id: 'id', payload: name }).message).toMatch(/identifier|non-empty/);
  });

  it('refuses one column in two roles, FIFO with advisory locks, and the database clock with leases', () => {
    expect(declarationError({ table: 'jobs', id: 'id', payload: 'id' }).message).toMatch(/both id and payload/);
    expect(
      declarationError({ table: 'jobs', id: 'id', group: { column: 'q', fifo: true }, advisoryLock: 'k-{id}' }).message,
    ).toMatch(/FIFO/);
    expect(declarationError({ table: 'jobs', id: 'id', lockedUntil: 'l', clock: 'database' }).message).toMatch(/clock/);
  });

  it('refuses unknown isolation levels and SQLite begin modes', () => {
    expect(declarationError({ table: 'jobs', id: 'id', isolation: 'snapshot' }).message).toMatch(/isolation/);
    expect(declarationError({ table: 'jobs', id: 'id', sqliteBegin: 'now' }).message).toMatch(/sqliteBegin/);
  });

  it("keeps the service's own statements as declared, a settlement as one text or a list, and refuses other names and shapes", () => {
    const spec = createTableSpec({
      table: 'jobs',
      id: 'id',
      statements: { ack: ['INSERT INTO audit (job) VALUES (:id)', 'DELETE FROM jobs WHERE id = :id'], claim: 'SELECT id FROM jobs LIMIT :limit' },
    });
    expect(spec.statements).toEqual({ ack: ['INSERT INTO audit (job) VALUES (:id)', 'DELETE FROM jobs WHERE id = :id'], claim: 'SELECT id FROM jobs LIMIT :limit' });
    expect(Object.isFrozen(spec.statements)).toBe(true);
    expect(createTableSpec({ table: 'jobs', id: 'id' }).statements).toBeUndefined();
    expect(declarationError({ table: 'jobs', id: 'id', statements: { finish: 'DELETE FROM jobs' } }).message).toBe(
      'table "jobs": statements.finish is not a statement a table can replace; they are claim, fetch, ack, drop, retry, retryAfter, deadLetter, extend, lock, unlock',
    );
    expect(declarationError({ table: 'jobs', id: 'id', statements: { claim: ['SELECT id FROM jobs'] } }).message).toBe(
      'table "jobs": statements.claim must be SQL text, got ["SELECT id FROM jobs"]',
    );
    expect(declarationError({ table: 'jobs', id: 'id', statements: { ack: [] } }).message).toBe(
      'table "jobs": statements.ack must be SQL text, or a list of SQL texts run in order, got []',
    );
    expect(declarationError({ table: 'jobs', id: 'id', statements: 'DELETE' }).message).toMatch(/statements must be an object/);
  });
});
