import { describe, expect, it } from 'vitest';
import type { Statement } from '../statement.js';
import { createTableSpec, roleColumns } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import { defineDialect } from './define-dialect.js';
import { compareRendering, placeholderMismatch, scanPlaceholders } from './dialect-comparison.js';
import { dialectRenderings, type DialectRendering } from './dialect-renderings.js';
import type { Dialect } from './dialect.js';

const postgres = createDialect('postgres');
const leaseSpec = createTableSpec({ table: 'jobs', id: 'id', group: 'queue', processedAt: 'done_at', lockedUntil: 'locked_until', payload: 'body', dedupeKey: 'key' });
const renderings = dialectRenderings({ spec: leaseSpec, columns: roleColumns(leaseSpec) });

function renderingOf(method: string, variant = ''): DialectRendering {
  return renderings.find((rendering) => rendering.method === method && rendering.variant === variant)!;
}

function overriding(overrides: Parameters<typeof defineDialect>[0]['overrides']): Dialect {
  return defineDialect({ basedOn: 'postgres', label: 'fork', interfaceVersion: 1, overrides });
}

const statement = (sql: string, params: Statement['params'], name = 'lease.extend'): Statement => ({ name, sql, params });

describe('scanPlaceholders', () => {
  it('finds $n on Postgres outside literals, quoted names, comments and dollar quotes; ? is an operator there', () => {
    const text = `SELECT $1, '$2', "$3", $tag$ $4 $tag$, $$ $5 $$ -- $6\n /* $7 */ FROM t WHERE data ? 'k' AND id = $2`;
    expect(scanPlaceholders(text, 'postgres')).toEqual({ numbered: [1, 2], questionMarks: 0 });
  });

  it('counts ? on MySQL and SQLite outside literals, quoted names and comments; MySQL reads backslash escapes and # comments', () => {
    expect(scanPlaceholders(`SELECT ?, '?', "?", \`?\`, 'it''s ?' -- ?\n /* ? */ , ?`, 'sqlite')).toEqual({ numbered: [], questionMarks: 2 });
    expect(scanPlaceholders(`SELECT 'a\\' ?', ? # ?\n, ?`, 'mysql')).toEqual({ numbered: [], questionMarks: 2 });
  });
});

describe('placeholderMismatch', () => {
  it('takes $1 to $n each at least once, repeats allowed', () => {
    expect(placeholderMismatch(statement('UPDATE t SET a = $1 WHERE id = $2 AND b = $1', ['lockedUntil', 'id']), 'postgres')).toBeUndefined();
  });

  it('names the placeholders found and the parameters declared when they differ', () => {
    expect(placeholderMismatch(statement('UPDATE t SET a = $1 WHERE id = $3', ['lockedUntil', 'id', 'held']), 'postgres')).toBe(
      'uses placeholders $1, $3 but declares 3 parameters (lockedUntil, id, held): $1 to $3, each at least once',
    );
    expect(placeholderMismatch(statement('UPDATE t SET a = ? WHERE id = ?', ['lockedUntil', 'id', 'held']), 'mysql')).toBe(
      'has 2 ? placeholders but declares 3 parameters (lockedUntil, id, held): one ? per parameter, in order',
    );
  });
});

describe('compareRendering', () => {
  it('conforms without differences for the built-in itself', () => {
    expect(compareRendering(postgres, createDialect('postgres'), renderingOf('lease.extend'))).toEqual({ kind: 'conforms', differs: false });
  });

  it('conforms with its own text when the name, placeholders and parameters are the ones the library binds', () => {
    const fork = overriding({
      lease: { extend: (spec) => statement(`UPDATE "${spec.name}" SET "locked_until" = $2 WHERE "locked_until" = $3 AND "id" = $1`, ['id', 'lockedUntil', 'held']) },
    });
    expect(compareRendering(postgres, fork, renderingOf('lease.extend'))).toEqual({ kind: 'conforms', differs: true });
  });

  it('fails a statement that drops a parameter the built-in binds (the lease token that fences it)', () => {
    const fork = overriding({ lease: { extend: () => statement('UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2', ['lockedUntil', 'id']) } });
    expect(compareRendering(postgres, fork, renderingOf('lease.extend'))).toEqual({
      kind: 'fails',
      problems: ['does not bind held (built-in postgres: lockedUntil, id, held)'],
    });
  });

  it('fails another name, an extra parameter and placeholders that do not match, all at once', () => {
    const fork = overriding({
      lease: { extend: () => statement('UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND "locked_until" = $3', ['lockedUntil', 'id', 'held', 'now'], 'extend') },
    });
    expect(compareRendering(postgres, fork, renderingOf('lease.extend'))).toEqual({
      kind: 'fails',
      problems: [
        'is named "extend" where the built-in names it "lease.extend" (errors and tests name statements by it)',
        'uses placeholders $1, $2, $3 but declares 4 parameters (lockedUntil, id, held, now): $1 to $4, each at least once',
        'binds now, which the library does not give it here (built-in postgres: lockedUntil, id, held)',
      ],
    });
  });

  it('fails an insert whose values are not in the order the library binds them', () => {
    const rendering = renderingOf('insert.rows', '2 rows');
    const fork = overriding((base) => ({
      insert: {
        rows: (spec, columns, rowCount, options) => {
          const rendered = base.insert.rows(spec, columns, rowCount, options);
          return { ...rendered, params: [...rendered.params].reverse() };
        },
      },
    }));
    const outcome = compareRendering(postgres, fork, rendering);
    expect(outcome.kind).toBe('fails');
    expect(outcome.kind === 'fails' && outcome.problems[0]).toMatch(/^binds column:.*, where the library binds values in exactly the built-in's order/);
  });

  it('fails a statement rendered for many rows that binds a row parameter another number of times', () => {
    const fork = overriding((base) => ({
      dedupe: {
        heldKeys: (spec) => {
          const rendered = base.dedupe.heldKeys(spec, 1);
          return { ...rendered, name: 'dedupe.heldKeys' };
        },
      },
    }));
    expect(compareRendering(postgres, fork, renderingOf('dedupe.heldKeys', '2 keys'))).toEqual({
      kind: 'fails',
      problems: [
        "binds dedupeKey once, where the library binds a row's values once per row, as the built-in does (dedupeKey twice) (built-in postgres: group, dedupeKey, dedupeKey)",
      ],
    });
  });

  it('fails another shape: a claim without the guard the built-in runs first on a FIFO table', () => {
    const fifo = createTableSpec({ table: 'jobs', id: 'id', group: { column: 'queue', fifo: true }, lockedUntil: 'locked_until' });
    const claim = dialectRenderings({ spec: fifo, columns: roleColumns(fifo) }).find((rendering) => rendering.method === 'lease.claim')!;
    const fork = overriding((base) => ({
      lease: {
        claim: (spec, columns, options) => {
          const rendered = base.lease.claim(spec, columns, options);
          return rendered.kind === 'single' ? { kind: 'single', statement: rendered.statement } : rendered;
        },
      },
    }));
    expect(compareRendering(postgres, fork, claim)).toEqual({
      kind: 'fails',
      problems: ['returns "single" where the built-in postgres dialect returns "single guarded"'],
    });
  });

  it('fails a refusal where the built-in renders, and a statement where it refuses', () => {
    const refusing = overriding({ settle: { finish: () => {
      throw new Error('no such thing on this fork');
    } } });
    expect(compareRendering(postgres, refusing, renderingOf('settle.finish', 'fenced'))).toEqual({
      kind: 'fails',
      problems: ['refuses (no such thing on this fork) where the built-in postgres dialect renders one'],
    });
    const uncommitted = renderingOf('session.begin', 'isolation read uncommitted');
    const lax = overriding((base) => ({ session: { begin: () => base.session.begin() } }));
    expect(compareRendering(postgres, lax, uncommitted)).toEqual({
      kind: 'fails',
      problems: [
        'renders where the built-in postgres dialect refuses (a transaction asks for read uncommitted, which PostgreSQL runs as read committed; declare isolation: "read committed"); refuse it too',
      ],
    });
  });

  it('does not ask a dialect for what it says it cannot do, and passes what neither renders', () => {
    const quiet = overriding({ capabilities: { supportsListenNotify: false } });
    expect(compareRendering(postgres, quiet, renderingOf('notify.listen'))).toEqual({ kind: 'notAsked' });
    const uncommitted = renderingOf('session.begin', 'isolation read uncommitted');
    expect(compareRendering(postgres, createDialect('postgres'), uncommitted)).toEqual({ kind: 'refusedByBoth' });
  });
});
