import { describe, expect, it } from 'vitest';
import { defineDialect, Outcome, SchemaError, StatementError, type Dialect, type Statement, type TableSpec } from '../../src/index.js';
import { checkDialectBehaviour } from '../../src/testing/index.js';
import { countRows, createBroker, createTable, jobsTable, placeholder, untilStats } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';
import type { Stand } from '../stand.js';

/**
 * A dialect of the service's own on every stand: one that extends the stand's built-in and
 * replaces the lease form's ack runs end to end, its text is what the broker prepares on the
 * server (the same ack with a misspelt column fails start()), the dialect kit's live scenarios
 * pass with it, and a dialect whose claim cannot be rendered fails start() naming it.
 */
export function serviceDialectSuite(context: SuiteContext): void {
  const { stand } = context;
  describe("a dialect of the service's own", () => {
    it('runs its own ack, its parameters in another order than the built-in binds them, and prepares it on the server at start', async () => {
      const table = jobsTable({ form: 'lease', name: 'own_ack_jobs' });
      await createTable(stand, context.db, table);
      const queue = table.queue<{ n: number }>('emails');
      const broker = createBroker(context.db, context.brokers, { dialect: ownAckDialect(stand, 'locked_until') });
      broker.subscribe(queue, () => Outcome.ack(), { coalesceSettlements: false });
      await broker.start();
      for (const n of [1, 2, 3]) await broker.publish(queue, { n });
      await untilStats(broker, queue, (stats) => stats.acked === 3, 'three acks');
      expect(await countRows(context.db, 'own_ack_jobs')).toBe(0);

      const misspelt = createBroker(context.db, context.brokers, { dialect: ownAckDialect(stand, 'locked_untill') });
      misspelt.subscribe(queue, () => Outcome.ack(), { coalesceSettlements: false });
      const failure = await misspelt.start().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(SchemaError);
      expect(failure).toMatchObject({ table: 'own_ack_jobs', statement: 'settle.finish' });
    });

    it("passes the dialect kit's live scenarios on this database", async () => {
      const report = await checkDialectBehaviour(ownAckDialect(stand, 'locked_until'), { database: context.db.brokerDatabase as string | object });
      expect(report.scenarios.filter((scenario) => scenario.outcome === 'failed')).toEqual([]);
      const skipped = report.scenarios.filter((scenario) => scenario.outcome === 'skipped').map((scenario) => scenario.name);
      expect(skipped).toEqual(stand.capabilities.supportsRowLock ? [] : ['row lock form: ack, retry, delay, dead letter, and a batch settled together']);
    });

    it('refuses, at start(), a dialect that cannot render the claim, with a StatementError naming the statement, the table and the dialect', async () => {
      const table = jobsTable({ form: 'lease', name: 'refused_jobs' });
      await createTable(stand, context.db, table);
      const dialect = defineDialect({
        basedOn: stand.ddlDialect,
        label: 'no-claims',
        interfaceVersion: 1,
        overrides: {
          lease: {
            claim: () => {
              throw new Error('this fork cannot claim');
            },
          },
        },
      });
      const broker = createBroker(context.db, context.brokers, { dialect });
      broker.subscribe(table.queue('emails'), () => undefined);
      const failure = await broker.start().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(StatementError);
      expect(failure).toMatchObject({ statement: 'lease.claim', database: 'no-claims' });
      expect((failure as Error).message).toMatch(/^dialect "no-claims" \(based on \w+\) cannot serve table "refused_jobs": lease\.claim refuses \(this fork cannot claim\)/);
    });
  });
}

/**
 * The stand's built-in dialect with the lease form's ack (a delete, on a table that neither marks
 * finished rows nor keeps unique keys) written by hand: the lease token first, then the id.
 */
function ownAckDialect(stand: Stand, leaseColumn: string): Dialect {
  const quote = (name: string): string => (stand.kind === 'postgres' ? `"${name}"` : `\`${name}\``);
  return defineDialect({
    basedOn: stand.ddlDialect,
    label: 'own-ack',
    interfaceVersion: 1,
    overrides: (base) => ({
      settle: {
        finish: (spec: TableSpec, options: { fenced: boolean }): Statement => {
          if (!options.fenced || spec.processedAt !== undefined || spec.dedupeKey !== undefined) return base.settle.finish(spec, options);
          const table = spec.schema === undefined ? quote(spec.name) : `${quote(spec.schema)}.${quote(spec.name)}`;
          return {
            name: 'settle.finish',
            sql: `DELETE FROM ${table} WHERE ${quote(leaseColumn)} = ${placeholder(stand, 1)} AND ${quote(spec.id.column)} = ${placeholder(stand, 2)}`,
            params: ['held', 'id'],
          };
        },
      },
    }),
  });
}
