import { parseArgs } from 'node:util';
import {
  DEFAULT_DASHBOARD_HOST,
  DEFAULT_DASHBOARD_PORT,
  DEFAULT_REFRESH_MS,
  openDashboard,
} from '../dashboard/dashboard.js';
import { DEFAULT_HEARTBEAT_TABLE } from '../dialect/heartbeat-statements.js';
import { DEFAULT_SCHEDULES_TABLE } from '../dialect/schedule-statements.js';
import { DEFAULT_QUEUE_CONTROLS_TABLE } from '../dialect/queue-control-statements.js';
import { checkAllowedHosts } from '../internal/host-allow-list.js';
import { DASHBOARD_FLAGS } from './command-flags.js';
import { columnsPerTable, DATABASE_FLAGS_HELP, deadLettersPerTable, inspectorOptionsOf } from './inspector-flags.js';
import { printable } from './terminal-output.js';
import { UsageError } from './usage-error.js';
import { writeLine, type CliIo } from './cli-io.js';

const DASHBOARD_USAGE = `usage: tablequeue dashboard --database URL --table NAME [options]

Serves a web page with the queues of each table (ready, delayed, in work, dead letters), a live
throughput chart, the dead letters with their last error, and the brokers that report to the
heartbeat table. Read-only unless started with --allow-actions. Runs until Ctrl-C.

${DATABASE_FLAGS_HELP}
  --table NAME              a queue table to show (name or schema.name); repeat for more
  --schema NAME             the schema (PostgreSQL) or database (MySQL) of tables named without one
  --dead-letter-group NAME  dead letters are rows of this group in each table; TABLE:NAME for one
                            --table only (repeatable), as in --table jobs --table mail
                            --dead-letter-group jobs:failed --dead-letter-group mail:mail.dead
  --dead-letter-table NAME  dead letters are rows of this table; TABLE:NAME for one --table only.
                            A table neither flag names lists no dead letters
  --column ROLE=NAME        a column named otherwise than by tablequeue init (repeatable), as in
                            tablequeue stats --help; TABLE:ROLE=NAME for one --table only, as in
                            --table jobs --table outbox --column outbox:group=name
  --heartbeat-table NAME    where brokers report (default ${DEFAULT_HEARTBEAT_TABLE})
  --schedules-table NAME    where brokers keep their schedules, shown when it exists (default ${DEFAULT_SCHEDULES_TABLE})
  --queue-controls-table NAME  where pauses are kept (default ${DEFAULT_QUEUE_CONTROLS_TABLE}, the brokers' queueControlsTable)
  --allow-actions           let the page requeue dead letters and pause and resume queues (otherwise POST answers 403)
  --port N                  default ${DEFAULT_DASHBOARD_PORT}; 0 picks a free port
  --host ADDRESS            default ${DEFAULT_DASHBOARD_HOST}: only this machine can open the page;
                            any other address lets the network in, with no login
  --allowed-host NAME       a name the page may be opened by (repeatable), NAME or NAME:PORT:
                            the server answers only requests addressed to localhost, 127.0.0.1,
                            [::1], the --host address with the port, and these, so a web page
                            cannot reach it by pointing a name of its own at it (DNS rebinding).
                            With --host 0.0.0.0 or :: the address names no host: give the name
                            or address others open the page by here
  --refresh-ms N            how often the tables are read (default ${DEFAULT_REFRESH_MS})
  -h, --help                this help`;

export async function runDashboardCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args,
    options: DASHBOARD_FLAGS,
    strict: true,
  });
  if (values.help) {
    writeLine(io.stdout, DASHBOARD_USAGE);
    return 0;
  }
  const tables = values.table ?? [];
  if (tables.length === 0) throw new UsageError(`dashboard needs at least one --table\n\n${DASHBOARD_USAGE}`);
  // Every table is read in the same schema; columns and dead-letter locations may differ per table.
  const { database, schema, pooler } = inspectorOptionsOf(
    'dashboard',
    { ...values, column: [], table: tables[0]!, 'dead-letter-group': undefined, 'dead-letter-table': undefined },
    DASHBOARD_USAGE,
    io.env,
  );
  const columnsByTable = columnsPerTable(values.column, tables);
  const deadLetterByTable = deadLettersPerTable(values['dead-letter-group'], values['dead-letter-table'], tables);
  const allowedHosts = values['allowed-host'] ?? [];
  try {
    checkAllowedHosts(allowedHosts, '--allowed-host');
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const dashboard = await openDashboard({
    database,
    tables,
    ...(schema === undefined ? {} : { schema }),
    deadLetterByTable,
    columnsByTable,
    ...(pooler === undefined ? {} : { pooler }),
    ...(values['heartbeat-table'] === undefined ? {} : { heartbeatTable: values['heartbeat-table'] }),
    ...(values['schedules-table'] === undefined ? {} : { schedulesTable: values['schedules-table'] }),
    ...(values['queue-controls-table'] === undefined ? {} : { queueControlsTable: values['queue-controls-table'] }),
    allowActions: values['allow-actions'] ?? false,
    host: values.host ?? DEFAULT_DASHBOARD_HOST,
    allowedHosts,
    port: values.port === undefined ? DEFAULT_DASHBOARD_PORT : portOf(values.port),
    refreshMs: values['refresh-ms'] === undefined ? DEFAULT_REFRESH_MS : refreshOf(values['refresh-ms']),
    onError: (error, detail) =>
      writeLine(io.stderr, printable(`tablequeue dashboard: ${String(detail['table'])}: ${error instanceof Error ? error.message : String(error)}`)),
  });
  writeLine(io.stdout, `dashboard at ${dashboard.url} (${values['allow-actions'] ? 'actions allowed' : 'read-only'}); Ctrl-C stops it`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await dashboard.close();
  return 0;
}

function portOf(text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new UsageError('--port must be a whole number from 0 to 65535');
  return port;
}

function refreshOf(text: string): number {
  const refreshMs = Number(text);
  if (!Number.isInteger(refreshMs) || refreshMs < 100) throw new UsageError('--refresh-ms must be a whole number of at least 100');
  return refreshMs;
}
