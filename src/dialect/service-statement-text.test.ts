import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { bindStatement } from '../statement.js';
import { createTableSpec, type TableDeclaration } from '../table/table-spec.js';
import { renderServiceStatement, renderServiceStatements, serviceStatementParameters } from './service-statement-text.js';

const lease: TableDeclaration = { table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', retryAfter: 'retry_after' };
const rowLock: TableDeclaration = { table: 'jobs', id: 'id', group: 'queue', retryAfter: 'retry_after' };
const where = 'table "jobs"';

describe('statements of the service\'s own: named parameters', () => {
  it('renders each name as $n on PostgreSQL, a name used twice binding once, in order of first use', () => {
    const claim = renderServiceStatement(
      'SELECT j.id FROM jobs j JOIN tenants t ON t.id = j.tenant WHERE j.queue = :group AND j.retry_after <= :now AND t.since <= :now LIMIT :limit',
      'statements.claim',
      'postgres',
      { allowed: ['group', 'now', 'limit'], required: [] },
      where,
    );
    expect(claim).toEqual({
      name: 'statements.claim',
      sql: 'SELECT j.id FROM jobs j JOIN tenants t ON t.id = j.tenant WHERE j.queue = $1 AND j.retry_after <= $2 AND t.since <= $2 LIMIT $3',
      params: ['group', 'now', 'limit'],
    });
    const now = new Date('2030-01-02T03:04:05.000Z');
    expect(bindStatement(claim, { limit: 5, now, group: 'emails' }).values).toEqual(['emails', now, 5]);
  });

  it('renders one ? per use on MySQL and SQLite, binding a name as often as it is used', () => {
    for (const protocol of ['mysql', 'sqlite'] as const) {
      const claim = renderServiceStatement(
        'SELECT id FROM jobs WHERE queue = :group AND retry_after <= :now AND created <= :now LIMIT :limit',
        'statements.claim',
        protocol,
        { allowed: ['group', 'now', 'limit'], required: [] },
        where,
      );
      expect(claim).toEqual({
        name: 'statements.claim',
        sql: 'SELECT id FROM jobs WHERE queue = ? AND retry_after <= ? AND created <= ? LIMIT ?',
        params: ['group', 'now', 'now', 'limit'],
      });
      const now = new Date('2030-01-02T03:04:05.000Z');
      expect(bindStatement(claim, { group: 'emails', now, limit: 2 }).values).toEqual(['emails', now, now, 2]);
    }
  });

  it('leaves casts, assignments, literals, quoted names and comments alone', () => {
    const text = `SELECT :id::bigint, x::text, @n := 1, ':id', "a:id", \`b:id\`, $$ :id $$ -- :id\n /* :id */ FROM t WHERE id = :id`;
    expect(renderServiceStatement(text, 'statements.ack', 'postgres', { allowed: ['id'], required: ['id'] }, where)).toEqual({
      name: 'statements.ack',
      sql: `SELECT $1::bigint, x::text, @n := 1, ':id', "a:id", \`b:id\`, $$ :id $$ -- :id\n /* :id */ FROM t WHERE id = $1`,
      params: ['id'],
    });
    expect(renderServiceStatement("SELECT 'it\\'s :id' # :id\n, :id", 'statements.ack', 'mysql', { allowed: ['id'], required: ['id'] }, where)).toEqual({
      name: 'statements.ack',
      sql: "SELECT 'it\\'s :id' # :id\n, ?",
      params: ['id'],
    });
  });

  it('refuses a name tablequeue does not bind there, a positional placeholder, and a missing name it needs', () => {
    const ack = { allowed: ['id', 'now'], required: ['id'] } as const;
    expect(() => renderServiceStatement('DELETE FROM jobs WHERE id = :id AND tenant = :tenant', 'statements.ack', 'postgres', ack, where)).toThrow(
      new DeclarationError('table "jobs": statements.ack uses :tenant, which tablequeue does not bind there; it binds :id, :now'),
    );
    expect(() => renderServiceStatement('DELETE FROM jobs WHERE id = $1', 'statements.ack', 'postgres', ack, where)).toThrow(
      new DeclarationError('table "jobs": statements.ack has a positional placeholder ($1); name its parameters instead, as :id'),
    );
    expect(() => renderServiceStatement('DELETE FROM jobs WHERE id = ?', 'statements.ack', 'sqlite', ack, where)).toThrow(
      new DeclarationError('table "jobs": statements.ack has a positional placeholder (?); name its parameters instead, as :id'),
    );
    expect(() => renderServiceStatement('DELETE FROM jobs', 'statements.ack', 'mysql', ack, where)).toThrow(
      new DeclarationError('table "jobs": statements.ack must use :id; docs/service-statements.md says why'),
    );
  });
});

describe("statements of the service's own: what each one binds", () => {
  it('gives the claim :group only on a grouped table, and the lease form\'s settlements :held', () => {
    const grouped = createTableSpec(lease);
    const ungrouped = createTableSpec({ table: 'jobs', id: 'id', lockedUntil: 'locked_until' });
    expect(serviceStatementParameters('claim', grouped, 'postgres').allowed).toEqual(['group', 'now', 'limit']);
    expect(serviceStatementParameters('claim', ungrouped, 'postgres').allowed).toEqual(['now', 'limit']);
    expect(serviceStatementParameters('ack', grouped, 'mysql')).toEqual({ allowed: ['id', 'now', 'held'], required: ['id'] });
    expect(serviceStatementParameters('ack', createTableSpec(rowLock), 'mysql')).toEqual({ allowed: ['id', 'now'], required: ['id'] });
    expect(serviceStatementParameters('retryAfter', createTableSpec(rowLock), 'sqlite').allowed).toEqual(['id', 'now', 'retryAfterAt', 'delayMicroseconds']);
    expect(serviceStatementParameters('deadLetter', grouped, 'sqlite').allowed).toEqual(['id', 'now', 'held', 'destination', 'lastError']);
    expect(serviceStatementParameters('extend', grouped, 'postgres')).toEqual({ allowed: ['id', 'held', 'lockedUntil'], required: ['id', 'held', 'lockedUntil'] });
    expect(serviceStatementParameters('lock', grouped, 'mysql')).toEqual({ allowed: ['key'], required: ['key'] });
    expect(serviceStatementParameters('fetch', grouped, 'postgres').allowed).toEqual(['ids', 'id']);
    expect(serviceStatementParameters('fetch', grouped, 'mysql').allowed).toEqual(['id']);
  });

  it('renders a settlement of several statements, each named by its place, and binds what a settlement binds', () => {
    const spec = createTableSpec({
      ...lease,
      statements: {
        ack: ['INSERT INTO audit (job, at) VALUES (:id, :now)', 'DELETE FROM jobs WHERE id = :id AND locked_until = :held'],
        retry: 'UPDATE jobs SET locked_until = NULL WHERE id = :id',
      },
    });
    const ack = renderServiceStatements('ack', spec, 'mysql');
    expect(ack).toEqual([
      { name: 'statements.ack[0]', sql: 'INSERT INTO audit (job, at) VALUES (?, ?)', params: ['id', 'now'] },
      { name: 'statements.ack[1]', sql: 'DELETE FROM jobs WHERE id = ? AND locked_until = ?', params: ['id', 'held'] },
    ]);
    expect(renderServiceStatements('retry', spec, 'postgres')).toEqual([
      { name: 'statements.retry', sql: 'UPDATE jobs SET locked_until = NULL WHERE id = $1', params: ['id'] },
    ]);
    expect(renderServiceStatements('drop', spec, 'postgres')).toEqual([]);
    const now = new Date('2030-01-02T03:04:05.000Z');
    const held = new Date('2030-01-02T03:05:00.000Z');
    expect(bindStatement(ack[1]!, { id: '7', held, now }).values).toEqual(['7', held]);
  });
});
