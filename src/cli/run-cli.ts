import type { CliIo } from './cli-io.js';
import { runAsyncApiCommand } from './asyncapi-command.js';
import { writeLine } from './cli-io.js';
import { runCancelCommand } from './cancel-command.js';
import { runDashboardCommand } from './dashboard-command.js';
import { runDemoCommand } from './demo-command.js';
import { runInitCommand } from './init-command.js';
import { runPeekCommand } from './peek-command.js';
import { runPruneCommand } from './prune-command.js';
import { runPurgeCommand } from './purge-command.js';
import { runRequeueCommand } from './requeue-command.js';
import { runSchedulesCommand } from './schedules-command.js';
import { runPauseCommand, runResumeCommand } from './pause-command.js';
import { runStatsCommand } from './stats-command.js';
import { printableLines } from './terminal-output.js';
import { UsageError } from './usage-error.js';

const USAGE = `usage: tablequeue <command> [options]

commands:
  init        create a queue table and its claim-order index (or print the SQL)
  stats       per group: ready, delayed, in work, processed, dead-lettered, oldest ready age
  peek        the next rows in claim order (or the dead letters), payloads decoded
  requeue     move dead letters back to their queue, by id or all, in one transaction
  purge       delete the rows of a table or of one group (asks for --yes)
  prune       delete processed rows and dead letters older than an age, in batches
  dashboard   serve a web page of the queues, throughput, dead letters and brokers
  schedules   the recurring schedules: queue, cron, zone, last and next tick, fired and missed
  pause       stop every broker claiming a queue (or a whole table) until resume; publishing goes on
  resume      let the brokers claim a paused queue again
  cancel      cancel one message: removed if waiting, its handler told to stop if in work
  asyncapi    print the AsyncAPI document of a broker a module exports: its queues, operations, messages
  demo        publish 20,000 messages into an SQLite queue file and drain them with several workers

run "tablequeue <command> --help" for a command's options; a command that opens a database
takes --database URL, or reads the URL from $DATABASE_URL (or the variable --database-env names),
which keeps a password out of the process list

exit codes: 0 done, 1 failed (database unreachable, table missing, statement failed, requeue
ids that are not dead letters, a cancel that found no such message), 2 bad usage (unknown
command or flag, missing flag, purge without --yes, requeue into a group nothing uses without --yes)`;

const COMMANDS: Record<string, (args: string[], io: CliIo) => Promise<number>> = {
  init: runInitCommand,
  stats: runStatsCommand,
  peek: runPeekCommand,
  requeue: runRequeueCommand,
  purge: runPurgeCommand,
  prune: runPruneCommand,
  dashboard: runDashboardCommand,
  schedules: runSchedulesCommand,
  pause: runPauseCommand,
  resume: runResumeCommand,
  cancel: runCancelCommand,
  asyncapi: runAsyncApiCommand,
  demo: runDemoCommand,
};

/**
 * Runs the `tablequeue` command line `argv` (the arguments after the command's name) writing to
 * `io`, and resolves with its exit code: 0 done, 1 failed, 2 bad usage. A failure is written to
 * `io.stderr`, never thrown. `stats --watch` and `dashboard` run until the process gets SIGINT or
 * SIGTERM, so only the installed command runs them.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      writeLine(io.stdout, USAGE);
      return command === undefined ? 2 : 0;
    }
    const run = COMMANDS[command];
    if (run === undefined) throw new UsageError(`unknown command "${command}"\n\n${USAGE}`);
    return await run(rest, io);
  } catch (error) {
    // A database's error can quote what it read (a name, a value); it is shown, never acted on.
    writeLine(io.stderr, printableLines(`tablequeue: ${error instanceof Error ? error.message : String(error)}`));
    const isUsage = error instanceof UsageError || String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS');
    return isUsage ? 2 : 1;
  }
}
