import { AssertionError } from 'node:assert';
import { describe, expect, it } from 'vitest';
import { createDialect } from '../dialect/create-dialect.js';
import { defineDialect } from '../dialect/define-dialect.js';
import { DeclarationError } from '../errors.js';
import type { TableSpec } from '../table/table-spec.js';
import { checkDialectBehaviour } from './dialect-behaviour.js';

/** SQLite in memory, a fresh database per scenario: the kit's default for a dialect based on SQLite. */
describe('checkDialectBehaviour on SQLite in memory', () => {
  it('passes the built-in dialect, skipping the row lock form SQLite has not got', async () => {
    const report = await checkDialectBehaviour(createDialect('sqlite'));
    expect(report.scenarios.map((scenario) => [scenario.outcome, scenario.reason])).toEqual([
      ['passed', undefined],
      ['passed', undefined],
      ['passed', undefined],
      ['skipped', 'the dialect has no row locks (supportsRowLock)'],
      ['passed', undefined],
    ]);
  });

  it("passes a dialect whose ack is its own, with its parameters in another order, and runs that ack", async () => {
    const acked: string[] = [];
    const dialect = defineDialect({
      basedOn: 'sqlite',
      label: 'own-ack',
      interfaceVersion: 1,
      overrides: (base) => ({
        settle: {
          finish: (spec: TableSpec, options: { fenced: boolean }) => {
            if (!options.fenced || spec.processedAt !== undefined) return base.settle.finish(spec, options);
            acked.push(spec.name);
            return {
              name: 'settle.finish',
              sql: `DELETE FROM \`${spec.name}\` WHERE \`${spec.lockedUntil!}\` = ? AND \`${spec.id.column}\` = ?`,
              params: ['held', 'id'],
            };
          },
        },
      }),
    });
    const report = await checkDialectBehaviour(dialect);
    expect(report.scenarios.filter((scenario) => scenario.outcome === 'failed')).toEqual([]);
    expect(acked.some((table) => table.endsWith('_fifo'))).toBe(true);
  });

  it('fails a dialect whose ack leaves the row claimable, saying which message settled how', async () => {
    const dialect = defineDialect({
      basedOn: 'sqlite',
      label: 'releasing-ack',
      interfaceVersion: 1,
      overrides: (base) => ({
        settle: {
          finish: (spec: TableSpec, options: { fenced: boolean }) =>
            options.fenced && spec.processedAt !== undefined
              ? {
                  name: 'settle.finish',
                  sql: `UPDATE \`${spec.name}\` SET \`${spec.lockedUntil!}\` = NULL WHERE \`id\` = ? AND \`${spec.lockedUntil!}\` = ? AND ? IS NOT NULL`,
                  params: ['id', 'held', 'now'],
                }
              : base.settle.finish(spec, options),
        },
      }),
    });
    const failure = await checkDialectBehaviour(dialect, { timeoutMs: 1_000 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(AssertionError);
    expect((failure as Error).message).toMatch(
      /^dialect "releasing-ack" failed 1 of 5 scenarios on the database it was given:\n {2}lease form: ack, retry, delay, dead letter and a lease renewed, settled coalesced and one at a time: AssertionError: "tq_kit_\w+_lease\/one_by_one": the "ack" message settled ack, ack, ack and on: \d+ times, expected ack;/,
    );
  });

  it('needs a database for a dialect of another protocol', async () => {
    await expect(checkDialectBehaviour(createDialect('postgres'))).rejects.toThrow(
      new DeclarationError("checkDialectBehaviour: dialect \"postgres\" speaks postgres; give it a database for tests, such as { database: 'postgres://…/test' }"),
    );
  });
});
