import { parseArgs } from 'node:util';
import { openQueueInspector, type TableQueueInspector } from '../admin/open-queue-inspector.js';
import { openDialect } from '../broker/open-dialect.js';
import { BrokerDirectory } from '../dashboard/broker-directory.js';
import { DEFAULT_HEARTBEAT_TABLE } from '../dialect/heartbeat-statements.js';
import { createDriver } from '../driver/create-driver.js';
import type { Driver } from '../driver/driver.js';
import { REQUEUE_FLAGS } from './command-flags.js';
import { INSPECTOR_FLAGS_HELP, inspectorOptionsOf } from './inspector-flags.js';
import { formatCount, printable, ProgressBar } from './terminal-output.js';
import { UsageError } from './usage-error.js';
import { writeLine, type CliIo } from './cli-io.js';

const REQUEUE_USAGE = `usage: tablequeue requeue --database URL --table NAME (--id ID… | --all) [options]

Moves dead letters back to the queue in one transaction: attempt reset to 1, due now, lease and
last error cleared. From the dead-letter table into the table (ids kept), or from the
dead-letter group into --to-group. Prints how many moved; exits 1 naming the ids given that were
not dead letters (the others moved).

A --to-group that no row of the table has and no running broker reads (by the heartbeat table)
is refused with exit 2, since a misspelt group would keep the rows where nothing reads them;
--yes moves them there anyway.

${INSPECTOR_FLAGS_HELP}
  --id ID                   a dead letter to move (repeatable)
  --all                     every dead letter
  --to-group NAME           the group they go to (needed with --dead-letter-group, whose rows no
                            longer say where they came from; optional with a dead-letter table)
  --heartbeat-table NAME    where brokers report the queues they read (default ${DEFAULT_HEARTBEAT_TABLE})
  --yes                     move into --to-group even when nothing uses that group`;

export async function runRequeueCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: REQUEUE_FLAGS, strict: true });
  if (values.help) {
    writeLine(io.stdout, REQUEUE_USAGE);
    return 0;
  }
  const options = inspectorOptionsOf('requeue', values, REQUEUE_USAGE, io.env);
  const ids = values.id;
  const toGroup = values['to-group'];
  if ((ids === undefined) === (values.all !== true)) {
    throw new UsageError(`requeue needs --id (repeatable) or --all, one of the two\n\n${REQUEUE_USAGE}`);
  }
  if (options.deadLetter === undefined) {
    throw new UsageError('requeue needs to know where the dead letters are: --dead-letter-group NAME or --dead-letter-table NAME');
  }
  if (options.deadLetter.kind === 'group' && toGroup === undefined) {
    throw new UsageError(
      `dead letters in group "${options.deadLetter.group}" no longer say which group they came from; name it with --to-group`,
    );
  }
  const driver = createDriver(options.database, { poolSize: 2, pooler: options.pooler });
  await driver.open();
  try {
    const inspector = await openQueueInspector({ ...options, database: driver });
    const progress = new ProgressBar(io.stdout, 'requeue');
    try {
      if (toGroup !== undefined && values.yes !== true) {
        const heartbeatTable = values['heartbeat-table'] ?? DEFAULT_HEARTBEAT_TABLE;
        const unused = await whyGroupIsUnused(driver, inspector, toGroup, heartbeatTable);
        if (unused !== undefined) {
          writeLine(
            io.stderr,
            printable(
              `tablequeue: ${unused}; a misspelt group would keep the dead letters where nothing reads them. ` +
                'Check the name, or run again with --yes to move them there anyway',
            ),
          );
          return 2;
        }
      }
      const notMoved: string[] = [];
      const moved = await inspector.requeue({
        ...(ids === undefined ? {} : { ids }),
        ...(toGroup === undefined ? {} : { toGroup }),
        onProgress: (doneCount, totalCount) => progress.update(doneCount, totalCount),
        onNotMoved: (id) => notMoved.push(id),
      });
      progress.finish();
      const destination = printable(toGroup === undefined ? `table "${inspector.spec.qualifiedName}"` : `group "${toGroup}"`);
      writeLine(io.stdout, `moved ${formatCount(moved)} dead letter${moved === 1 ? '' : 's'} back to ${destination}`);
      if (notMoved.length === 0) return 0;
      const where =
        options.deadLetter.kind === 'group' ? `group "${options.deadLetter.group}"` : `table "${options.deadLetter.table}"`;
      writeLine(
        io.stderr,
        printable(
          `tablequeue: not moved: ${notMoved.join(', ')} ${notMoved.length === 1 ? 'is not a dead letter' : 'are not dead letters'} in ${where}`,
        ),
      );
      return 1;
    } finally {
      progress.finish();
      await inspector.close();
    }
  } finally {
    await driver.close();
  }
}

/**
 * Why nothing uses `group`, or undefined when something does: a row of the table is in it, or a
 * broker that reports to the heartbeat table reads it (its subscription's queue is
 * `table/group`). Only live brokers count, as on the dashboard.
 */
async function whyGroupIsUnused(
  driver: Driver,
  inspector: TableQueueInspector,
  group: string,
  heartbeatTable: string,
): Promise<string | undefined> {
  const inspection = await inspector.inspect();
  if (inspection.groups.some((counts) => counts.group === group && (counts.total ?? 0) > 0)) return undefined;
  const table = inspector.spec.qualifiedName;
  const label = `${table}/${group}`;
  const dialect = await openDialect(driver);
  const { brokers, problem } = await new BrokerDirectory({ driver, database: dialect.name, table: heartbeatTable }).list();
  const readers = brokers.filter((broker) =>
    broker.subscriptions.some((subscription) => (subscription as { queue?: unknown } | null)?.queue === label),
  );
  if (readers.length > 0) return undefined;
  const brokersSaid =
    problem ?? `${formatCount(brokers.length)} running broker${brokers.length === 1 ? '' : 's'} report to heartbeat table "${heartbeatTable}", none reading it`;
  return `group "${group}" of table "${table}" has no rows, and no running broker reads it (${brokersSaid})`;
}
