import { parseArgs } from 'node:util';
import { ScheduleListing, type ScheduleList } from '../admin/schedule-listing.js';
import { openDialect } from '../broker/open-dialect.js';
import { DEFAULT_SCHEDULES_TABLE } from '../dialect/schedule-statements.js';
import { createDriver } from '../driver/create-driver.js';
import { SchemaError } from '../errors.js';
import { writeLine, type CliIo } from './cli-io.js';
import { SCHEDULES_FLAGS } from './command-flags.js';
import { DATABASE_FLAGS_HELP, databaseTargetOf } from './inspector-flags.js';
import { formatCount, formatTable, jsonForTerminal, paintFor, printable, type Paint } from './terminal-output.js';

const SCHEDULES_USAGE = `usage: tablequeue schedules --database URL [options]

The recurring schedules brokers declared (broker.schedule), from the schedules table: the queue
each writes to, its cron and time zone, the last tick fired (or passed over as missed), the next
tick, how many ticks were fired and missed, and when a broker last declared it. A schedule no
code declares any more stays listed, with the time it was last declared.

${DATABASE_FLAGS_HELP}
  --schedules-table NAME    the table (default ${DEFAULT_SCHEDULES_TABLE}, the brokers' schedulesTable)
  --json                    one JSON document
  -h, --help                this help`;

export async function runSchedulesCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: SCHEDULES_FLAGS, strict: true });
  if (values.help) {
    writeLine(io.stdout, SCHEDULES_USAGE);
    return 0;
  }
  const { url: database, pooler } = databaseTargetOf('schedules', values, SCHEDULES_USAGE, io.env);
  const table = values['schedules-table'] ?? DEFAULT_SCHEDULES_TABLE;
  const driver = createDriver(database, { poolSize: 1, pooler });
  await driver.open();
  try {
    const listing = new ScheduleListing({ driver, database: (await openDialect(driver)).name, table });
    const list = await listing.list();
    if (list.problem !== null) throw new SchemaError({ table, statement: 'schedule.list', message: list.problem });
    writeLine(io.stdout, values.json ? jsonForTerminal(list.schedules, 2) : renderSchedules(list, paintFor(io.stdout, io.env)).join('\n'));
    return 0;
  } finally {
    await driver.close();
  }
}

export function renderSchedules(list: ScheduleList, paint: Paint): string[] {
  const title = `${paint.bold(printable(list.table))}  ${formatCount(list.schedules.length)} schedule${list.schedules.length === 1 ? '' : 's'}`;
  if (list.schedules.length === 0) return [title, paint.dim('(none declared yet)')];
  const rows = list.schedules.map((schedule) => [
    printable(schedule.name),
    printable(schedule.queue),
    printable(schedule.cron),
    printable(schedule.timeZone),
    schedule.lastTickAt ?? '-',
    schedule.nextTickAt ?? '-',
    formatCount(schedule.firedCount),
    schedule.missedCount > 0 ? paint.yellow(formatCount(schedule.missedCount)) : paint.dim('0'),
    schedule.declaredAt,
  ]);
  return [
    title,
    ...formatTable(
      [
        { heading: 'name' },
        { heading: 'queue' },
        { heading: 'cron' },
        { heading: 'zone' },
        { heading: 'last tick' },
        { heading: 'next tick' },
        { heading: 'fired', align: 'right' },
        { heading: 'missed', align: 'right' },
        { heading: 'declared' },
      ],
      rows,
      paint,
    ),
  ];
}
