import { parseArgs } from 'node:util';
import { openDialect } from '../broker/open-dialect.js';
import { queueControlLabel, QueueControls, type QueueControlKey } from '../broker/queue-controls.js';
import { DEFAULT_QUEUE_CONTROLS_TABLE, WHOLE_TABLE_QUEUE_NAME } from '../dialect/queue-control-statements.js';
import { createDriver } from '../driver/create-driver.js';
import { validateQueueName } from '../definition/queue-name.js';
import { parseQualifiedName } from '../table/identifier.js';
import { writeLine, type CliIo } from './cli-io.js';
import { PAUSE_FLAGS } from './command-flags.js';
import { DATABASE_FLAGS_HELP, databaseTargetOf } from './inspector-flags.js';
import { printable } from './terminal-output.js';
import { UsageError } from './usage-error.js';

const flagsHelp = `${DATABASE_FLAGS_HELP}
  --table NAME              the queue table, as the code declares it
  --schema NAME             its schema (PostgreSQL) or database (MySQL), as the code declares it
  --queue NAME              one queue (the group) of the table; without it, every queue of the
                            table, and the only choice for a table without groups
  --queue-controls-table NAME  where the state is kept (default ${DEFAULT_QUEUE_CONTROLS_TABLE},
                            the brokers' queueControlsTable option)
  -h, --help                this help`;

const PAUSE_USAGE = `usage: tablequeue pause --database URL --table NAME [--queue NAME] [options]

Pauses a queue for every broker that reads it: each stops claiming its rows within one poll
interval (at once where the brokers LISTEN, PostgreSQL's default). Rows in work finish and settle;
publishing goes on, and the rows wait. The pause lasts until tablequeue resume, across restarts.
The queue controls table is created if it is missing.

${flagsHelp}`;

const RESUME_USAGE = `usage: tablequeue resume --database URL --table NAME [--queue NAME] [options]

Undoes tablequeue pause of the same queue (or of the whole table without --queue): every broker
claims again within one poll interval (at once where they LISTEN). A queue stays paused while
its whole table is.

${flagsHelp}`;

export function runPauseCommand(args: string[], io: CliIo): Promise<number> {
  return runControl('pause', PAUSE_USAGE, args, io);
}

export function runResumeCommand(args: string[], io: CliIo): Promise<number> {
  return runControl('resume', RESUME_USAGE, args, io);
}

async function runControl(action: 'pause' | 'resume', usage: string, args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: PAUSE_FLAGS, strict: true });
  if (values.help) {
    writeLine(io.stdout, usage);
    return 0;
  }
  const { url: database, pooler } = databaseTargetOf(action, values, usage, io.env);
  if (values.table === undefined) throw new UsageError(`${action} needs --table NAME\n\n${usage}`);
  const queueTable = values.schema === undefined ? values.table : `${values.schema}.${values.table}`;
  try {
    parseQualifiedName(queueTable, '--table');
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const queueName = values.queue === undefined ? WHOLE_TABLE_QUEUE_NAME : checkedQueueName(values.queue);
  const key: QueueControlKey = { queueTable, queueName };
  const driver = createDriver(database, { poolSize: 1, pooler });
  await driver.open();
  try {
    const dialect = await openDialect(driver);
    const controls = new QueueControls({
      driver,
      database: dialect.name,
      table: values['queue-controls-table'] ?? DEFAULT_QUEUE_CONTROLS_TABLE,
      notify: dialect.notify,
    });
    await (action === 'pause' ? controls.pause(key) : controls.resume(key));
    writeLine(io.stdout, printable(stateLine(key, await controls.pausedBy(key))));
    return 0;
  } finally {
    await driver.close();
  }
}

function checkedQueueName(name: string): string {
  try {
    return validateQueueName(name, '--queue');
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

/** The state after the write, which a resume of one queue of a paused table does not end. */
function stateLine(key: QueueControlKey, pausedBy: readonly string[]): string {
  const label = queueControlLabel(key);
  if (key.queueName === WHOLE_TABLE_QUEUE_NAME) return `${label} (every queue of the table): ${pausedBy.length > 0 ? 'paused' : 'running'}`;
  if (pausedBy.length === 0) return `${label}: running`;
  if (!pausedBy.includes(WHOLE_TABLE_QUEUE_NAME)) return `${label}: paused`;
  return `${label}: paused, since every queue of ${key.queueTable} is; tablequeue resume --table without --queue resumes them`;
}
