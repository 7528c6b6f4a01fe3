import { parseArgs } from 'node:util';
import type { GroupCounts } from '../admin/inspection.js';
import { DEFAULT_HEARTBEAT_TABLE } from '../dialect/heartbeat-statements.js';
import { DEFAULT_QUEUE_CONTROLS_TABLE } from '../dialect/queue-control-statements.js';
import { abortableSleep } from '../internal/abortable-sleep.js';
import { STATS_FLAGS } from './command-flags.js';
import { INSPECTOR_FLAGS_HELP, inspectorOptionsOf } from './inspector-flags.js';
import { openQueueReadersInspector, type InspectionWithReaders } from './queue-readers-inspector.js';
import { formatAge, formatCount, formatTable, jsonForTerminal, paintFor, printable, type OutputStream, type Paint } from './terminal-output.js';
import { UsageError } from './usage-error.js';
import { writeLine, type CliIo } from './cli-io.js';

const STATS_USAGE = `usage: tablequeue stats --database URL --table NAME [options]

Per group (queue) of the table: rows ready now, delayed (retry time in the future), in work
(holding a live lease; row lock claims in progress are not visible without locking rows),
processed (tables that mark instead of deleting), dead-lettered, and the age of the oldest ready
row (since its retry time). A dead letter counts only as dead-lettered: a row whose headers carry
the last error a dead-letter move wrote, any row of --dead-letter-group, or a row of
--dead-letter-table (counted in the group it came from).

A group with ready rows that no running broker subscribes to (a misspelt queue name, say) is
flagged "unread", judged by the heartbeat table of brokers started with the heartbeat option,
and only while one of them reads this table: without such a broker nothing is flagged.

Queues an operator paused (tablequeue pause) are marked "paused", from the queue controls table.

A lease queue whose reporting brokers declare a concurrency limit (or read FIFO groups) counts
its rows in work on every claim; when no index of the table serves that count, a line says so
and gives the CREATE INDEX that adds one.

${INSPECTOR_FLAGS_HELP}
  --heartbeat-table NAME    where brokers report the queues they read (default ${DEFAULT_HEARTBEAT_TABLE})
  --queue-controls-table NAME  where pauses are kept (default ${DEFAULT_QUEUE_CONTROLS_TABLE})
  --watch [SECONDS]         print again every SECONDS (default 2) until Ctrl-C, which exits 0
  --json                    one JSON document; with --watch, one document per line`;

const DEFAULT_WATCH_SECONDS = 2;

export async function runStatsCommand(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args: withWatchValue(args),
    options: STATS_FLAGS,
    strict: true,
  });
  if (values.help) {
    writeLine(io.stdout, STATS_USAGE);
    return 0;
  }
  const options = inspectorOptionsOf('stats', values, STATS_USAGE, io.env);
  const watchMs = values.watch === undefined ? undefined : watchIntervalMs(values.watch);
  const out: OutputStream = io.stdout;
  const paint = paintFor(out, io.env);
  const inspector = await openQueueReadersInspector(
    options,
    values['heartbeat-table'] ?? DEFAULT_HEARTBEAT_TABLE,
    values['queue-controls-table'] ?? DEFAULT_QUEUE_CONTROLS_TABLE,
  );
  try {
    if (watchMs === undefined) {
      const inspection = await inspector.inspect();
      out.write(values.json ? `${jsonForTerminal(inspectionJson(inspection), 2)}\n` : `${renderInspection(inspection, paint).join('\n')}\n`);
      return 0;
    }
    const stop = new AbortController();
    // Kept until the process exits: a wrapper that passes Ctrl-C on (npm) sends SIGINT a second
    // time, which would otherwise end the process by the signal (exit 130) while it closes. A
    // signal listener does not keep the process alive.
    const onSignal = () => stop.abort();
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    let linesDrawn = 0;
    while (!stop.signal.aborted) {
      const inspection = await inspector.inspect();
      if (values.json) {
        out.write(`${jsonForTerminal(inspectionJson(inspection))}\n`);
      } else {
        const lines = renderInspection(inspection, paint);
        // On a terminal the snapshot replaces the last one; elsewhere snapshots follow each other.
        if (out.isTTY === true && linesDrawn > 0) out.write(`\u001b[${linesDrawn}F\u001b[0J`);
        out.write(`${lines.join('\n')}\n${out.isTTY === true ? '' : '\n'}`);
        linesDrawn = lines.length;
      }
      await abortableSleep(watchMs, stop.signal);
    }
  } finally {
    await inspector.close();
  }
  // Ended by Ctrl-C, closed, every snapshot written: exit now. Left to end by itself, Node would
  // first take its signal handlers down, and a SIGINT passed on late would land then.
  process.exit(0);
}

/** `--watch` takes an optional value: a bare `--watch` gets the default. */
function withWatchValue(args: readonly string[]): string[] {
  const result: string[] = [];
  for (const [index, arg] of args.entries()) {
    result.push(arg);
    if (arg !== '--watch') continue;
    const next = args[index + 1];
    if (next === undefined || !/^\d+(\.\d+)?$/.test(next)) result.push(String(DEFAULT_WATCH_SECONDS));
  }
  return result;
}

function watchIntervalMs(text: string): number {
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 0.1) throw new UsageError('--watch takes seconds between refreshes, at least 0.1');
  return Math.round(seconds * 1000);
}

/**
 * The JSON form: the inspection as it is, times as ISO text; `readers` and each group's `unread`
 * are null when the heartbeats cannot tell.
 */
export function inspectionJson(inspection: InspectionWithReaders): Record<string, unknown> {
  const { readers } = inspection;
  return {
    table: inspection.table,
    readAt: inspection.readAt.toISOString(),
    deadLettered: inspection.deadLettered,
    deadLetter: inspection.deadLetter ?? null,
    groups: inspection.groups.map((counts) => ({
      group: counts.group,
      ready: counts.ready,
      delayed: counts.delayed,
      inWork: counts.inWork,
      processed: counts.processed,
      deadLettered: counts.deadLettered ?? 0,
      total: counts.total ?? null,
      oldestReadyAgeSeconds: counts.oldestReadyAgeSeconds,
      unread: readers === null ? null : counts.group !== null && readers.unreadGroups.includes(counts.group),
      reported: readers === null ? null : (readers.reported.find((queue) => queue.group === counts.group) ?? null),
      paused: isGroupPaused(inspection, counts.group),
    })),
    readers: readers === null ? null : { heartbeatTable: inspection.heartbeatTable, ...readers },
    unindexedRowsInWork: inspection.unindexedRowsInWork,
    paused: inspection.paused === null ? null : { queueControlsTable: inspection.queueControlsTable, ...inspection.paused },
    relays: inspection.relays,
  };
}

export function renderInspection(inspection: InspectionWithReaders, paint: Paint): string[] {
  const where =
    inspection.deadLetter === undefined
      ? ''
      : inspection.deadLetter.kind === 'group'
        ? ` in group "${printable(inspection.deadLetter.group)}"`
        : ` in table "${printable(inspection.deadLetter.table)}"`;
  const title =
    `${paint.bold(printable(inspection.table))}  read ${inspection.readAt.toISOString()}  ` +
    `dead letters: ${inspection.deadLettered > 0 ? paint.red(formatCount(inspection.deadLettered)) : '0'}${where}` +
    (inspection.paused?.wholeTable === true ? `  ${paint.yellow('paused: every queue')}` : '');
  if (inspection.groups.length === 0) {
    return [title, paint.dim('(no rows)'), ...pausedWithoutRowsLines(inspection, paint), ...unindexedLines(inspection, paint), ...relayLines(inspection, paint)];
  }
  const count = (value: number, colour: (text: string) => string) => (value > 0 ? colour(formatCount(value)) : paint.dim('0'));
  const rows = inspection.groups.map((counts: GroupCounts) => [
    (counts.group === null ? '(table)' : printable(counts.group)) + (isGroupPaused(inspection, counts.group) === true ? ` ${paint.yellow('paused')}` : ''),
    count(counts.ready, paint.green),
    count(counts.delayed, paint.yellow),
    count(counts.inWork, (text) => text),
    count(counts.processed, (text) => text),
    count(counts.deadLettered ?? 0, paint.red),
    formatAge(counts.oldestReadyAgeSeconds),
  ]);
  const table = formatTable(
    [
      { heading: 'group' },
      { heading: 'ready', align: 'right' },
      { heading: 'delayed', align: 'right' },
      { heading: 'in work', align: 'right' },
      { heading: 'processed', align: 'right' },
      { heading: 'dead-lettered', align: 'right' },
      { heading: 'oldest ready', align: 'right' },
    ],
    rows,
    paint,
  );
  return [
    title,
    ...table,
    ...unreadLines(inspection, paint),
    ...reportedLines(inspection, paint),
    ...pausedWithoutRowsLines(inspection, paint),
    ...unindexedLines(inspection, paint),
    ...relayLines(inspection, paint),
  ];
}

/**
 * An outbox's relays as their brokers report them, each with the names it waits to send again:
 * a name whose failed sends keep growing is stuck, and its error says why.
 */
function relayLines(inspection: InspectionWithReaders, paint: Paint): string[] {
  return (inspection.relays ?? []).flatMap((relay) => {
    const counts = [
      `${formatCount(relay.relayed)} relayed`,
      `${formatCount(relay.failedSends)} failed sends`,
      `${formatCount(relay.namesInWork)} names in work`,
      `${formatCount(relay.namesWaitingToRetry)} waiting to retry`,
    ];
    const head = printable(`relayed to ${relay.destination} by ${relay.broker.host} pid ${relay.broker.pid}: ${counts.join(', ')}`);
    const waiting = relay.waitingNames.map((waiting) => {
      const when = waiting.retryInMs === 0 ? 'due again now' : `again in ${formatAge(Math.ceil(waiting.retryInMs / 1000))}`;
      const why = waiting.error === null ? `: ${SEND_NOT_BEGUN}` : `: ${waiting.error}`;
      const sends = `${formatCount(waiting.failedSends)} failed ${waiting.failedSends === 1 ? 'send' : 'sends'} in a row`;
      return paint.yellow(printable(`  waiting: "${waiting.name}" after ${sends}, ${when}${why}`));
    });
    return [relay.namesWaitingToRetry > 0 ? paint.yellow(head) : paint.dim(head), ...waiting];
  });
}

/** Why a relay waits with no error: its send never began. */
const SEND_NOT_BEGUN = 'its send could not begin (a service transaction held the SQLite handle)';

/** The queues whose claims count their rows in work by reading the whole table, and the index that stops it. */
function unindexedLines(inspection: InspectionWithReaders, paint: Paint): string[] {
  const unindexed = inspection.unindexedRowsInWork;
  if (unindexed === null) return [];
  const names = unindexed.queues
    .map(({ group, reason }) => `${group === null ? 'the table' : `group "${group}"`} (${reason === 'concurrency' ? 'a concurrency limit' : 'FIFO groups'})`)
    .join(', ');
  const [counts, their] = unindexed.queues.length === 1 ? ['counts', 'its'] : ['count', 'their'];
  return [
    paint.yellow(
      printable(
        `no in-work index: ${names} ${counts} the rows in work on every claim, as ${their} brokers report, ` +
          `and each count reads the whole table; add the index with: ${unindexed.createIndexSql}`,
      ),
    ),
  ];
}

/** What the reporting brokers declare and count per queue: limits, timed-out and cancelled messages. */
function reportedLines(inspection: InspectionWithReaders, paint: Paint): string[] {
  const { readers } = inspection;
  if (readers === null) return [];
  return readers.reported.flatMap((queue) => {
    const parts = [...queue.limits];
    if (queue.timedOut > 0) parts.push(`${formatCount(queue.timedOut)} timed out`);
    if (queue.cancelled > 0) parts.push(`${formatCount(queue.cancelled)} cancelled`);
    if (parts.length === 0) return [];
    const name = queue.group === null ? 'the table' : `group "${queue.group}"`;
    return [paint.dim(printable(`${name}: ${parts.join(', ')} (as its brokers report)`))];
  });
}

/** Whether the group (null: a table without groups) is paused; null when the controls table cannot be read. */
function isGroupPaused(inspection: InspectionWithReaders, group: string | null): boolean | null {
  const { paused } = inspection;
  if (paused === null) return null;
  return paused.wholeTable || (group !== null && paused.groups.includes(group));
}

/** Paused groups that have no rows, so no line of the table to mark. */
function pausedWithoutRowsLines(inspection: InspectionWithReaders, paint: Paint): string[] {
  const shown = new Set(inspection.groups.map((counts) => counts.group));
  const hidden = (inspection.paused?.groups ?? []).filter((group) => !shown.has(group));
  return hidden.length === 0 ? [] : [paint.yellow(printable(`paused, without rows: ${hidden.join(', ')}`))];
}

/** A line per group that no reporting broker reads; none when the heartbeats cannot tell. */
function unreadLines(inspection: InspectionWithReaders, paint: Paint): string[] {
  const { readers } = inspection;
  if (readers === null) return [];
  const brokers = readers.brokers === 1 ? '1 broker reads' : `${formatCount(readers.brokers)} brokers read`;
  return readers.unreadGroups.map((group) => {
    const ready = inspection.groups.find((counts) => counts.group === group)?.ready ?? 0;
    return paint.yellow(
      printable(
        `unread: group "${group}" has ${formatCount(ready)} ready row${ready === 1 ? '' : 's'}, and no running broker subscribes to it ` +
          `(${brokers} this table and report${readers.brokers === 1 ? 's' : ''} to heartbeat table "${inspection.heartbeatTable}"); check the queue name`,
      ),
    );
  });
}
