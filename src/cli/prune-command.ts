import { parseArgs } from 'node:util';
import { openQueueInspector } from '../admin/open-queue-inspector.js';
import { DEFAULT_DEDUPE_WINDOWS_TABLE } from '../dialect/dedupe-window-statements.js';
import { checkPrunable, MAX_PRUNE_BATCH_SIZE, type PruneTarget } from '../dialect/retention-statements.js';
import { SchemaError } from '../errors.js';
import { DEFAULT_PRUNE_BATCH_SIZE, DEFAULT_PRUNE_PAUSE_MS } from '../retention/retention-options.js';
import { PRUNE_FLAGS } from './command-flags.js';
import { writeLine, type CliIo } from './cli-io.js';
import { INSPECTOR_FLAGS_HELP, inspectorOptionsOf } from './inspector-flags.js';
import { formatCount, printable } from './terminal-output.js';
import { UsageError } from './usage-error.js';

const PRUNE_USAGE = `usage: tablequeue prune --database URL --table NAME [--processed-older-than AGE]
                       [--dead-letters-older-than AGE (--dead-letter-group NAME | --dead-letter-table NAME)]
                       [--dedupe-windows [--dedupe-windows-table NAME]]
                       [--batch N] [--pause-ms N] [--dry-run]

Deletes processed rows and dead letters older than an age, and the table's dedupeForMs windows that
have passed, as broker.retain does: in batches by primary key that skip rows another transaction
holds, each batch its own transaction, with a pause between them, so claims go on meanwhile. A
processed row's age counts from its processedAt, a dead letter's from its retryAfter (when its last
attempt became due). Prints the rows deleted of each kind.

${INSPECTOR_FLAGS_HELP}
  --processed-older-than AGE     delete processed rows older than AGE: 500ms, 90s, 30m, 12h, 7d
  --dead-letters-older-than AGE  delete dead letters older than AGE (with their location)
  --dedupe-windows               delete the table's dedupeForMs windows that have passed
  --dedupe-windows-table NAME    where they are (default ${DEFAULT_DEDUPE_WINDOWS_TABLE}, the brokers'
                                 dedupeWindowsTable)
  --batch N                      rows per batch, 1 to ${formatCount(MAX_PRUNE_BATCH_SIZE)} (default ${formatCount(DEFAULT_PRUNE_BATCH_SIZE)})
  --pause-ms N                   milliseconds between batches (default ${DEFAULT_PRUNE_PAUSE_MS})
  --dry-run                      only count the rows it would delete`;

const AGE_UNITS_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `7d`, `12h`, `30m`, `90s`, `500ms` → milliseconds; a bare number is refused, since its unit would be a guess. */
export function parseAge(value: string, flag: string): number {
  const match = /^(\d+)(ms|s|m|h|d)$/.exec(value);
  const milliseconds = match === null ? Number.NaN : Number(match[1]) * AGE_UNITS_MS[match[2]!]!;
  if (!Number.isSafeInteger(milliseconds) || milliseconds < 1) {
    throw new UsageError(`${flag} takes an age such as 7d, 12h, 30m, 90s or 500ms, got "${value}"\n\n${PRUNE_USAGE}`);
  }
  return milliseconds;
}

function wholeNumber(value: string | undefined, flag: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const number = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(number) || number < min || number > max) {
    throw new UsageError(`${flag} takes a whole number from ${min} to ${max}, got "${value}"`);
  }
  return number;
}

export async function runPruneCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: PRUNE_FLAGS, strict: true });
  if (values.help) {
    writeLine(io.stdout, PRUNE_USAGE);
    return 0;
  }
  const processedAge = values['processed-older-than'];
  const deadLetterAge = values['dead-letters-older-than'];
  const windows = values['dedupe-windows'] === true;
  if (values['dedupe-windows-table'] !== undefined && !windows) {
    throw new UsageError('--dedupe-windows-table says where the windows are; add --dedupe-windows to delete the passed ones');
  }
  if (processedAge === undefined && deadLetterAge === undefined && !windows) {
    throw new UsageError(
      `prune needs --processed-older-than AGE, --dead-letters-older-than AGE, --dedupe-windows, or several of them\n\n${PRUNE_USAGE}`,
    );
  }
  const hasLocation = values['dead-letter-group'] !== undefined || values['dead-letter-table'] !== undefined;
  if (deadLetterAge !== undefined && !hasLocation) {
    throw new UsageError('--dead-letters-older-than needs where the dead letters are: --dead-letter-group NAME or --dead-letter-table NAME');
  }
  const ages: { kind: PruneTarget['kind']; olderThanMs: number; shown: string }[] = [];
  if (processedAge !== undefined) ages.push({ kind: 'processed', olderThanMs: parseAge(processedAge, '--processed-older-than'), shown: processedAge });
  if (deadLetterAge !== undefined) ages.push({ kind: 'deadLetter', olderThanMs: parseAge(deadLetterAge, '--dead-letters-older-than'), shown: deadLetterAge });
  const batchSize = wholeNumber(values.batch, '--batch', DEFAULT_PRUNE_BATCH_SIZE, 1, MAX_PRUNE_BATCH_SIZE);
  const pauseMs = wholeNumber(values['pause-ms'], '--pause-ms', DEFAULT_PRUNE_PAUSE_MS, 0, 60_000);

  const inspector = await openQueueInspector(inspectorOptionsOf('prune', values, PRUNE_USAGE, io.env));
  try {
    const { pruner, deadLetters } = inspector.pruner();
    const targets = ages.map((age) => {
      const target: PruneTarget = age.kind === 'processed' ? { kind: 'processed' } : { kind: 'deadLetter', destination: deadLetters! };
      checkPrunable(inspector.spec, target, 'tablequeue prune');
      return { ...age, target };
    });
    const what = (kind: PruneTarget['kind'], rowCount: number) =>
      `${kind === 'processed' ? 'processed row' : 'dead letter'}${rowCount === 1 ? '' : 's'}`;
    for (const { kind, target, olderThanMs, shown } of targets) {
      const rowCount =
        values['dry-run'] === true ? await pruner.count(target, olderThanMs) : await pruner.prune({ target, olderThanMs, batchSize, pauseMs });
      const verb = values['dry-run'] === true ? 'would delete' : 'deleted';
      writeLine(
        io.stdout,
        printable(`${verb} ${formatCount(rowCount)} ${what(kind, rowCount)} older than ${shown} of table "${inspector.spec.qualifiedName}"`),
      );
    }
    if (windows) {
      const windowsTable = values['dedupe-windows-table'] ?? DEFAULT_DEDUPE_WINDOWS_TABLE;
      const windowPruner = inspector.dedupeWindowPruner(windowsTable);
      let windowCount: number;
      try {
        windowCount = values['dry-run'] === true ? await windowPruner.count() : await windowPruner.prune({ batchSize, pauseMs });
      } catch (error) {
        throw new SchemaError({
          table: windowsTable,
          statement: values['dry-run'] === true ? 'dedupeWindow.countPassed' : 'dedupeWindow.prunePassed',
          message: `the dedupe windows table "${windowsTable}" cannot be read (${error instanceof Error ? error.message : String(error)}); a broker creates it at its first publish with dedupeForMs, and --dedupe-windows-table names another`,
          cause: error,
        });
      }
      const verb = values['dry-run'] === true ? 'would delete' : 'deleted';
      writeLine(io.stdout, printable(`${verb} ${formatCount(windowCount)} passed dedupe window${windowCount === 1 ? '' : 's'} of table "${inspector.spec.qualifiedName}" in "${windowsTable}"`));
    }
    return 0;
  } finally {
    await inspector.close();
  }
}
