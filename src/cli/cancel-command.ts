import { parseArgs } from 'node:util';
import { openQueueInspector } from '../admin/open-queue-inspector.js';
import { MessageCanceller, type CancelResult } from '../broker/message-cancel.js';
import { openDialect } from '../broker/open-dialect.js';
import { validateQueueName } from '../definition/queue-name.js';
import { DEFAULT_CANCELLATIONS_TABLE } from '../dialect/cancellation-statements.js';
import { createDriver } from '../driver/create-driver.js';
import { writeLine, type CliIo } from './cli-io.js';
import { CANCEL_FLAGS } from './command-flags.js';
import { DATABASE_FLAGS_HELP, inspectorOptionsOf } from './inspector-flags.js';
import { printable } from './terminal-output.js';
import { UsageError } from './usage-error.js';

const CANCEL_USAGE = `usage: tablequeue cancel --database URL --table NAME [--queue NAME] --id ID [options]

Cancels one message, in whichever broker or process runs it, and prints what it found:
  waiting   the message was removed (deleted, or marked processed where the table has a
            processed_at column) before any handler saw it
  inWork    a handler runs it: its context.signal aborts, and the message is removed whatever the
            handler returns, never retried (a lease table's broker hears at its next renewal, a row
            lock table's within one poll interval)
  gone      no unfinished message with that id in the queue (exit status 1)
Lease and row lock tables; a table whose code declares advisoryLock cannot be told from a row
lock table by its columns, so cancel in one with broker.cancel, not this command. The cancellations table is
created if it is missing.

${DATABASE_FLAGS_HELP}
  --table NAME              the queue table
  --schema NAME             its schema (PostgreSQL) or database (MySQL)
  --queue NAME              the queue (the group) the message is in; not for a table without groups
  --id ID                   the message's id
  --column ROLE=NAME        a column named otherwise than by tablequeue init (repeatable); ROLE is
                            id, group, priority, retryAfter, attempt, processedAt, lockedUntil,
                            headers or payload; NAME "-" says the table has none
  --cancellations-table NAME  where cancels of messages in work are recorded (default
                            ${DEFAULT_CANCELLATIONS_TABLE}, the brokers' cancellationsTable option)
  -h, --help                this help`;

const DESCRIPTIONS: Readonly<Record<CancelResult['status'], string>> = {
  waiting: 'removed before any handler saw it',
  inWork: 'in work: its handler is told to stop, and it is removed whatever the handler returns',
  gone: 'no unfinished message with this id in the queue; nothing was cancelled',
};

export async function runCancelCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: CANCEL_FLAGS, strict: true });
  if (values.help) {
    writeLine(io.stdout, CANCEL_USAGE);
    return 0;
  }
  const options = inspectorOptionsOf('cancel', values, CANCEL_USAGE, io.env);
  const id = values.id;
  if (id === undefined || id === '') throw new UsageError(`cancel needs --id ID\n\n${CANCEL_USAGE}`);
  const driver = createDriver(options.database as string, { poolSize: 2, pooler: options.pooler });
  await driver.open();
  try {
    const inspector = await openQueueInspector({ ...options, database: driver });
    const spec = inspector.spec;
    const group = queueOf(values.queue, spec.group !== undefined, spec.qualifiedName);
    const dialect = await openDialect(driver);
    const canceller = new MessageCanceller({
      driver,
      dialect,
      table: values['cancellations-table'] ?? DEFAULT_CANCELLATIONS_TABLE,
      // PostgreSQL: brokers that LISTEN hear a cancel of a message in work at once.
      notify: dialect.notify,
      onNotifyError: (error) =>
        writeLine(io.stderr, printable(`could not notify the brokers (they read the cancel at their next poll): ${(error as Error).message}`)),
    });
    const { status } = await canceller.cancelIn(spec, group, id);
    const label = group === undefined ? spec.qualifiedName : `${spec.qualifiedName}/${group}`;
    writeLine(io.stdout, printable(`${status}: message ${id} of ${label}: ${DESCRIPTIONS[status]}`));
    return status === 'gone' ? 1 : 0;
  } finally {
    await driver.close();
  }
}

function queueOf(queue: string | undefined, hasGroups: boolean, table: string): string | undefined {
  if (!hasGroups) {
    if (queue !== undefined) throw new UsageError(`table "${table}" has no group column, so it has one queue; leave out --queue`);
    return undefined;
  }
  if (queue === undefined) throw new UsageError(`cancel needs --queue NAME: table "${table}" has a group column, and the message is in one of its queues`);
  try {
    return validateQueueName(queue, '--queue');
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}
