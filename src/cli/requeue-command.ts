import { parseArgs } from 'node:util';
import { openQueueInspector } from '../admin/open-queue-inspector.js';
import { INSPECTOR_FLAGS, INSPECTOR_FLAGS_HELP, inspectorOptionsOf } from './inspector-flags.js';
import { formatCount, printable, ProgressBar } from './terminal-output.js';
import { UsageError } from './usage-error.js';

const REQUEUE_USAGE = `usage: tablequeue requeue --database URL --table NAME (--id ID… | --all) [options]

Moves dead letters back to the queue in one transaction, attempt reset to 1 and lease cleared:
from the dead-letter table into the table (ids kept), or from the dead-letter group into
--to-group. Prints how many moved.

${INSPECTOR_FLAGS_HELP}
  --id ID                   a dead letter to move (repeatable)
  --all                     every dead letter
  --to-group NAME           the group they go to (needed with --dead-letter-group, whose rows no
                            longer say where they came from; optional with a dead-letter table)`;

export async function runRequeueCommand(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      ...INSPECTOR_FLAGS,
      id: { type: 'string', multiple: true },
      all: { type: 'boolean' },
      'to-group': { type: 'string' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(REQUEUE_USAGE);
    return 0;
  }
  const options = inspectorOptionsOf('requeue', values, REQUEUE_USAGE);
  const ids = values.id;
  if ((ids === undefined) === (values.all !== true)) {
    throw new UsageError(`requeue needs --id (repeatable) or --all, one of the two\n\n${REQUEUE_USAGE}`);
  }
  if (options.deadLetter === undefined) {
    throw new UsageError('requeue needs to know where the dead letters are: --dead-letter-group NAME or --dead-letter-table NAME');
  }
  if (options.deadLetter.kind === 'group' && values['to-group'] === undefined) {
    throw new UsageError(
      `dead letters in group "${options.deadLetter.group}" no longer say which group they came from; name it with --to-group`,
    );
  }
  const inspector = await openQueueInspector(options);
  const progress = new ProgressBar(process.stdout, 'requeue');
  try {
    const moved = await inspector.requeue({
      ...(ids === undefined ? {} : { ids }),
      ...(values['to-group'] === undefined ? {} : { toGroup: values['to-group'] }),
      onProgress: (doneCount, totalCount) => progress.update(doneCount, totalCount),
    });
    progress.finish();
    const destination = printable(
      values['to-group'] === undefined ? `table "${inspector.spec.qualifiedName}"` : `group "${values['to-group']}"`,
    );
    console.log(`moved ${formatCount(moved)} dead letter${moved === 1 ? '' : 's'} back to ${destination}`);
    if (ids !== undefined && moved < ids.length) {
      console.error(`tablequeue: ${formatCount(ids.length - moved)} of the ids given ${ids.length - moved === 1 ? 'is' : 'are'} not a dead letter; nothing else changed`);
    }
    return 0;
  } finally {
    progress.finish();
    await inspector.close();
  }
}
