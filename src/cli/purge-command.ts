import { parseArgs } from 'node:util';
import { openQueueInspector } from '../admin/open-queue-inspector.js';
import { PURGE_FLAGS } from './command-flags.js';
import { INSPECTOR_FLAGS_HELP, inspectorOptionsOf } from './inspector-flags.js';
import { formatCount, printable } from './terminal-output.js';
import { writeLine, type CliIo } from './cli-io.js';

const PURGE_USAGE = `usage: tablequeue purge --database URL --table NAME [--group NAME] --yes

Deletes every row of the table, or of one group, in one statement: ready, delayed, in work and
processed alike. Without --yes it only says what it would delete and exits 2.

${INSPECTOR_FLAGS_HELP}
  --group NAME              only this group
  --yes                     really delete`;

export async function runPurgeCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args,
    options: PURGE_FLAGS,
    strict: true,
  });
  if (values.help) {
    writeLine(io.stdout, PURGE_USAGE);
    return 0;
  }
  const options = inspectorOptionsOf('purge', values, PURGE_USAGE, io.env);
  const inspector = await openQueueInspector(options);
  try {
    const what = printable(
      values.group === undefined ? `table "${inspector.spec.qualifiedName}"` : `group "${values.group}" of table "${inspector.spec.qualifiedName}"`,
    );
    if (values.yes !== true) {
      const inspection = await inspector.inspect();
      const rowCount = inspection.groups
        .filter((counts) => values.group === undefined || counts.group === values.group)
        .reduce((sum, counts) => sum + (counts.total ?? 0), 0);
      writeLine(io.stderr, `tablequeue: purge would delete ${formatCount(rowCount)} row${rowCount === 1 ? '' : 's'} of ${what}; run it again with --yes to delete them`);
      return 2;
    }
    const deleted = await inspector.purge(values.group === undefined ? {} : { group: values.group });
    writeLine(io.stdout, `deleted ${formatCount(deleted)} row${deleted === 1 ? '' : 's'} of ${what}`);
    return 0;
  } finally {
    await inspector.close();
  }
}
