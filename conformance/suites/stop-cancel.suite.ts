import { describe, expect, it } from 'vitest';
import type { HandlerContext } from '../../src/index.js';
import { Collector, countRows, createBroker, createTable, formsOf, jobsTable } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/** A statement that would hold its session for an hour. */
export function hourLongSleep(context: SuiteContext): string {
  return context.stand.kind === 'postgres' ? 'SELECT pg_sleep(3600)' : 'SELECT SLEEP(3600)';
}

/** Sessions other than the asking one that run the hour-long sleep now. */
export async function sleepsRunning(context: SuiteContext): Promise<number> {
  const sql =
    context.stand.kind === 'postgres'
      ? `SELECT COUNT(*) AS n FROM pg_stat_activity
          WHERE datname = current_database() AND state = 'active' AND query LIKE '%sleep(3600)%' AND pid <> pg_backend_pid()`
      : `SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST
          WHERE INFO LIKE '%SLEEP(3600)%' AND ID <> CONNECTION_ID()`;
  const rows = await context.db.query<{ n: unknown }>(sql);
  return Number(rows[0]!.n);
}

type Where = 'context.query' | 'context.tx';

/**
 * `stop({ timeoutMs })` while a handler waits on the database: the statement is cancelled on the
 * server, every connection comes back, and stop resolves within the timeout and a bounded grace.
 */
export function stopCancelSuite(context: SuiteContext): void {
  const { stand } = context;
  // SQLite statements run to their end inside their call: nothing waits on the server.
  if (stand.capabilities.hasSingleWriter) return;
  for (const form of formsOf(stand)) {
    for (const where of ['context.query', 'context.tx'] as const satisfies readonly Where[]) {
      describe(`${form} stop while a handler waits on the database (${where})`, () => {
        it('stop({ timeoutMs: 1000 }) resolves within a few seconds, leaves no query running and the row in the queue', async () => {
          const table = jobsTable({ form });
          await createTable(stand, context.db, table);
          const broker = createBroker(context.db, context.brokers);
          const started = new Collector<string>();
          broker.subscribe(
            table.queue('emails'),
            async (message, handlerContext: HandlerContext) => {
              started.push(message.id);
              const run = where === 'context.tx' ? handlerContext.tx! : handlerContext;
              await run.query(hourLongSleep(context));
            },
            { transactional: where === 'context.tx' },
          );
          const reported: string[] = [];
          broker.on('error', (_error, detail) => reported.push(String(detail['phase'])));
          await broker.start();
          await broker.publish(table.queue('emails'), { n: 1 });
          await started.waitFor(1);
          await waitForSleep(context);
          const stopStartedAt = performance.now();
          await broker.stop({ timeoutMs: 1_000 });
          // The timeout, the handlers' grace of one second, and the cancel and close.
          expect(performance.now() - stopStartedAt).toBeLessThan(5_000);
          expect(await sleepsRunning(context)).toBe(0);
          expect(await countRows(context.db, 'jobs')).toBe(1);
          // The handler's cancelled query is its failure to report; nothing else went wrong.
          expect(reported.filter((phase) => phase !== 'handler')).toEqual([]);
        });
      });
    }
  }
}

/** Waits until the server runs the handler's sleep, so stop() meets it running. */
export async function waitForSleep(context: SuiteContext): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((await sleepsRunning(context)) === 0) {
    if (Date.now() > deadline) throw new Error('the handler\'s sleep never showed on the server');
  }
}
