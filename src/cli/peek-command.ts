import { parseArgs } from 'node:util';
import type { PeekedRow } from '../admin/inspection.js';
import { openQueueInspector } from '../admin/open-queue-inspector.js';
import { PEEK_FLAGS } from './command-flags.js';
import { INSPECTOR_FLAGS_HELP, inspectorOptionsOf } from './inspector-flags.js';
import { formatTable, jsonForTerminal, paintFor, printable, type Paint } from './terminal-output.js';
import { positiveInteger, UsageError } from './usage-error.js';
import { writeLine, type CliIo } from './cli-io.js';

const PEEK_USAGE = `usage: tablequeue peek --database URL --table NAME [options]

Shows the next unfinished rows in claim order, payloads decoded (JSON when it parses, else text).
Without --group or --dead-letters, dead letters are left out: rows a dead-letter move marked with
their last error, and the rows of --dead-letter-group.
"attempts" counts the deliveries a row has had since it was published or requeued; for a dead
letter, all it was given.

${INSPECTOR_FLAGS_HELP}
  --group NAME              only this group
  --dead-letters            the dead letters instead (needs --dead-letter-group or --dead-letter-table;
                            without one it exits 2)
  --limit N                 how many rows (default 10)
  --json                    one JSON array of the rows`;

const PAYLOAD_PREVIEW_CHARACTERS = 60;

export async function runPeekCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args,
    options: PEEK_FLAGS,
    strict: true,
  });
  if (values.help) {
    writeLine(io.stdout, PEEK_USAGE);
    return 0;
  }
  const options = inspectorOptionsOf('peek', values, PEEK_USAGE, io.env);
  if (values['dead-letters'] === true && options.deadLetter === undefined) {
    throw new UsageError('peek --dead-letters needs to know where the dead letters are: --dead-letter-group NAME or --dead-letter-table NAME');
  }
  const limit = positiveInteger(values.limit ?? '10', '--limit');
  const inspector = await openQueueInspector(options);
  try {
    const rows = await inspector.peek({
      limit,
      ...(values.group === undefined ? {} : { group: values.group }),
      ...(values['dead-letters'] ? { deadLetters: true } : {}),
    });
    if (values.json) {
      writeLine(io.stdout, jsonForTerminal(rows, 2));
    } else {
      writeLine(io.stdout, renderPeekedRows(rows, paintFor(io.stdout, io.env)).join('\n'));
    }
    return 0;
  } finally {
    await inspector.close();
  }
}

export function renderPeekedRows(rows: readonly PeekedRow[], paint: Paint): string[] {
  if (rows.length === 0) return [paint.dim('(no rows)')];
  const time = (value: Date | null) => (value === null ? '-' : value.toISOString());
  return formatTable(
    [
      { heading: 'id', align: 'right' },
      { heading: 'group' },
      { heading: 'attempts', align: 'right' },
      { heading: 'retry after' },
      { heading: 'locked until' },
      { heading: 'payload' },
      { heading: 'last error' },
    ],
    rows.map((row) => [
      printable(row.id),
      row.group === null ? '-' : printable(row.group),
      row.attemptsMade === null ? '-' : String(row.attemptsMade),
      time(row.retryAfter),
      time(row.lockedUntil),
      preview(typeof row.payload === 'string' ? row.payload : JSON.stringify(row.payload)),
      row.lastError === null ? '-' : paint.red(preview(row.lastError)),
    ]),
    paint,
  );
}

/**
 * One line of at most `PAYLOAD_PREVIEW_CHARACTERS` characters of the text, so the table stays a
 * table; control characters left after the white space is folded are shown as escapes, which
 * may make the line longer.
 */
function preview(text: string): string {
  const oneLine = text.replace(/\s+/g, ' ');
  const characters = [...oneLine];
  return printable(characters.length <= PAYLOAD_PREVIEW_CHARACTERS ? oneLine : `${characters.slice(0, PAYLOAD_PREVIEW_CHARACTERS - 1).join('')}…`);
}
