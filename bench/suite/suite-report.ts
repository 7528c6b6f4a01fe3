import type { BenchDatabaseName } from '../bench-database.js';
import type { MachineDescription } from '../machine.js';
import type { MemoryResult } from './memory-drain.js';
import { spread } from '../statistics.js';
import { PUBLISH_MODE_LABELS, PUBLISH_VARIANT_LABELS } from './publish-throughput.js';
import type { DrainPoint, PublishPoint, PublishRecord, PublishWay } from './suite-benchmark.js';

/** What `npm run bench` writes to bench/results/suite.json, and what the report reads back. */
export interface SuiteResults {
  readonly benchmark: 'suite';
  readonly command: string;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly isInterrupted: boolean;
  readonly settings: {
    readonly messages: number;
    readonly databases: readonly BenchDatabaseName[];
    readonly workerCounts: Partial<Record<BenchDatabaseName, readonly number[]>>;
    readonly rounds: number;
    readonly runTimeoutMs: number;
    readonly contenders: readonly string[];
    readonly publishOneRows: number;
    readonly isPublishIncluded: boolean;
    /** Absent in results written before keyed publishes were measured (every plain way ran). */
    readonly publishWays?: readonly PublishWay[];
    readonly memoryRows: number | undefined;
    readonly memoryWorkers: number | undefined;
  };
  /** The library's coalescing option when it had one; undefined: no coalesced runs. */
  readonly coalescingOption: string | undefined;
  readonly machine: MachineDescription;
  readonly loadAverageAtEnd: readonly [number, number, number];
  readonly serverVersions: Partial<Record<BenchDatabaseName, string>>;
  readonly peerVersions: Record<string, string | undefined>;
  readonly drains: readonly DrainPoint[];
  readonly publishes: readonly PublishPoint[];
  readonly memory: MemoryResult | { readonly failure: string } | undefined;
}

/** A drain point with the ratios the tables show. */
export interface DrainRow {
  readonly point: DrainPoint;
  /** Median over the median of its raw loop (service contenders). */
  readonly toRaw: number | undefined;
  /** Median over the best peer's median at the same database and worker count. */
  readonly toBestPeer: number | undefined;
  readonly bestPeer: DrainPoint | undefined;
}

export function drainRows(results: SuiteResults): DrainRow[] {
  return results.drains.map((point) => {
    const group = results.drains.filter((other) => other.database === point.database && other.workers === point.workers);
    const raw = group.find((other) => other.contender === point.rawBaseline);
    const bestPeer = best(group.filter((other) => other.kind === 'peer'));
    return { point, toRaw: ratio(point.median, raw?.median), toBestPeer: ratio(point.median, bestPeer?.median), bestPeer };
  });
}

/**
 * Publish throughput with its ratios: the service over its raw statements, and over the best
 * peer's bulk insert; a keyed publish over the plain one.
 */
export interface PublishRow {
  readonly point: PublishPoint;
  readonly toRaw: number | undefined;
  /** Keyed variants: median over the plain service publish's median, same database and mode. */
  readonly toPlain: number | undefined;
  readonly toBestPeer: number | undefined;
  readonly bestPeerLabel: string | undefined;
  readonly bestPeerRowsPerSecond: number | undefined;
}

export function publishRows(results: SuiteResults): PublishRow[] {
  return results.publishes.map((point) => {
    const raw = results.publishes.find((other) => other.database === point.database && other.mode === point.mode && other.variant === 'raw');
    const plain = plainPublishOf(results, point);
    // Peers' bulk inserts are timed while they fill, in calls of 1,000 jobs: the publishMany
    // runs' comparison. Nothing comparable is measured for one job at a time.
    const peers = point.mode === 'many' ? peerInserts(results, point.database) : [];
    const bestPeer = peers.reduce<(typeof peers)[number] | undefined>((top, each) => (top === undefined || each.rowsPerSecond > top.rowsPerSecond ? each : top), undefined);
    return {
      point,
      toRaw: point.variant === 'service' ? ratio(point.median, raw?.median) : undefined,
      toPlain: plain === undefined ? undefined : ratio(point.median, plain.median),
      toBestPeer: point.variant === 'service' ? ratio(point.median, bestPeer?.rowsPerSecond) : undefined,
      bestPeerLabel: bestPeer?.label,
      bestPeerRowsPerSecond: bestPeer?.rowsPerSecond,
    };
  });
}

/** The plain service publish a keyed point is held against; undefined for the plain ones. */
function plainPublishOf(results: SuiteResults, point: PublishPoint): PublishPoint | undefined {
  if (point.variant !== 'keyed' && point.variant !== 'keyedDuplicate') return undefined;
  return results.publishes.find((other) => other.database === point.database && other.mode === point.mode && other.variant === 'service');
}

/** A keyed publish beside the plain one it is held against: medians, and the ratio round by round. */
export interface KeyedRow {
  readonly keyed: PublishPoint;
  readonly plain: PublishPoint | undefined;
  /** Median over median. */
  readonly toPlain: number | undefined;
  /** Keyed over plain within each round where both counted (they ran one after the other). */
  readonly roundRatios: number[];
}

/** Per database, the keyed publishes each beside its plain one, in the order they ran. */
export function keyedRows(results: SuiteResults, database: BenchDatabaseName): KeyedRow[] {
  return results.publishes
    .filter((point) => point.database === database && (point.variant === 'keyed' || point.variant === 'keyedDuplicate'))
    .map((keyed) => {
      const plain = plainPublishOf(results, keyed);
      return { keyed, plain, toPlain: ratio(keyed.median, plain?.median), roundRatios: plain === undefined ? [] : pairedRatios(keyed.runs, plain.runs) };
    });
}

function pairedRatios(runs: readonly PublishRecord[], against: readonly PublishRecord[]): number[] {
  return runs.flatMap((run) => {
    const other = against.find((each) => each.round === run.round);
    return run.isValid && other?.isValid === true && other.rowsPerSecond > 0 ? [run.rowsPerSecond / other.rowsPerSecond] : [];
  });
}

/** Each peer's bulk insert rate on a database: the median over all its fills there. */
export function peerInserts(results: SuiteResults, database: BenchDatabaseName): { label: string; rowsPerSecond: number }[] {
  const byPeer = new Map<string, { label: string; rates: number[] }>();
  for (const point of results.drains) {
    if (point.kind !== 'peer' || point.database !== database) continue;
    const entry = byPeer.get(point.contender) ?? { label: point.label, rates: [] };
    for (const run of point.runs) if (run.insertRowsPerSecond !== undefined && run.failure === undefined) entry.rates.push(run.insertRowsPerSecond);
    byPeer.set(point.contender, entry);
  }
  return [...byPeer.values()].filter((entry) => entry.rates.length > 0).map((entry) => ({ label: entry.label, rowsPerSecond: middle(entry.rates) }));
}

/** One of the performance aims, as this run measured it. */
export interface AimRow {
  readonly aim: string;
  readonly measured: string;
  readonly against: string;
  readonly ratio: number | undefined;
  readonly target: number;
  /** Undefined when one side was not measured in this run. */
  readonly isReached: boolean | undefined;
}

const PER_JOB_PEERS = ['peer.graphileWorker', 'peer.pgBossBatch', 'peer.bullmq'];

/** The performance aims, each as a ratio of two medians of this run (or, for publishMany, a rate). */
export function aimRows(results: SuiteResults): AimRow[] {
  const find = (database: BenchDatabaseName, workers: number, contender: string) =>
    results.drains.find((point) => point.database === database && point.workers === workers && point.contender === contender);
  const rows: AimRow[] = [];
  const compare = (aim: string, target: number, mine: DrainPoint | undefined, theirs: DrainPoint | undefined) => {
    const value = ratio(mine?.median, theirs?.median);
    rows.push({
      aim,
      measured: describePoint(mine),
      against: describePoint(theirs),
      ratio: value,
      target,
      isReached: value === undefined ? undefined : value >= target,
    });
  };
  const bestPerJobPeer = best(PER_JOB_PEERS.map((id) => find('postgres', 16, id)).filter((point) => point !== undefined));
  compare('PostgreSQL, per-message row lock, workers 16 ≥ best per-job peer', 1, find('postgres', 16, 'service.rowLock'), bestPerJobPeer);
  compare('PostgreSQL, per-message lease, workers 16 ≥ best per-job peer', 1, find('postgres', 16, 'service.lease'), bestPerJobPeer);
  // Coalescing is the lease form's default and keeps an outcome and a token check per message.
  compare('PostgreSQL, per-message lease as configured by default (coalesced), workers 16 ≥ best per-job peer', 1, find('postgres', 16, 'service.leaseCoalesced'), bestPerJobPeer);
  const localQueue = find('postgres', 16, 'peer.graphileWorkerLocalQueue');
  compare('PostgreSQL, lease coalesced, workers 16 ≥ graphile-worker localQueue', 1, find('postgres', 16, 'service.leaseCoalesced'), localQueue);
  // Its local queue is rows fetched ahead; prefetch is the same thing, so it is held to it too.
  compare('PostgreSQL, lease coalesced with prefetch, workers 16 ≥ graphile-worker localQueue', 1, find('postgres', 16, 'service.leaseCoalescedPrefetch'), localQueue);
  compare('PostgreSQL, row lock batch 100, workers 16 ≥ 0.8 raw batched loop', 0.8, find('postgres', 16, 'service.rowLockBatch'), find('postgres', 16, 'raw.rowLockBatch'));
  compare('PostgreSQL, lease batch 100, workers 16 ≥ 0.8 raw batched loop', 0.8, find('postgres', 16, 'service.leaseBatch'), find('postgres', 16, 'raw.leaseBatch'));
  const sqliteLabels: Record<string, string> = {
    'service.lease': 'lease',
    'service.leaseCoalesced': 'lease coalesced',
    'service.leaseCoalescedPrefetch': 'lease coalesced with prefetch',
  };
  for (const [lease, label] of Object.entries(sqliteLabels)) {
    compare(`SQLite, ${label}, workers 4 ≥ 2 × plainjob`, 2, find('sqlite', 4, lease), find('sqlite', 4, 'peer.plainjob'));
    compare(`SQLite, ${label}, workers 4 ≥ 0.8 raw loop`, 0.8, find('sqlite', 4, lease), find('sqlite', 4, 'raw.lease'));
  }
  for (const form of ['rowLock', 'lease', 'rowLockBatch', 'leaseBatch']) {
    compare(`MariaDB, ${form}, workers 16 ≥ 0.9 raw loop`, 0.9, find('mariadb', 16, `service.${form}`), find('mariadb', 16, `raw.${form}`));
  }
  const publishMany = results.publishes.find((point) => point.database === 'postgres' && point.mode === 'many' && point.variant === 'service');
  rows.push({
    aim: 'PostgreSQL, publishMany ≥ 60,000 rows/s',
    measured: publishMany?.median === undefined ? 'not measured' : `${formatRate(publishMany.median)} rows/s`,
    against: 'the fixed figure',
    ratio: ratio(publishMany?.median, 60_000),
    target: 1,
    isReached: publishMany?.median === undefined ? undefined : publishMany.median >= 60_000,
  });
  return rows.filter((row) => row.isReached !== undefined || row.measured !== 'not measured');
}

/** Plain text for the terminal: one table per database and worker count, then publish and memory. */
export function formatSuiteText(results: SuiteResults): string {
  const sections: string[] = [];
  const rows = drainRows(results);
  for (const [database, workers] of groups(results)) {
    const here = rows.filter((row) => row.point.database === database && row.point.workers === workers);
    sections.push(`${database}, ${workers} workers\n${textTable(drainHeader, here.map(drainCells))}`);
  }
  const publishes = publishRows(results);
  if (publishes.length > 0) sections.push(`publish\n${textTable(publishHeader, publishes.map(publishCells))}`);
  for (const database of publishDatabases(results)) {
    const keyed = keyedRows(results, database);
    if (keyed.length > 0) sections.push(`keyed publishes, ${database}\n${textTable(keyedHeader, keyed.map(keyedCells))}`);
  }
  const aims = aimRows(results);
  if (aims.length > 0) sections.push(`aims\n${textTable(aimHeader, aims.map(aimCells))}`);
  if (results.memory !== undefined) sections.push(`memory\n${describeMemoryLine(results.memory)}`);
  return sections.join('\n\n');
}

/** Markdown for docs/benchmarks.md: the same tables, generated from a results file. */
export function formatSuiteMarkdown(results: SuiteResults): string {
  const sections: string[] = [];
  const rows = drainRows(results);
  for (const [database, workers] of groups(results)) {
    const here = rows.filter((row) => row.point.database === database && row.point.workers === workers);
    sections.push(`#### ${database}, ${workers} workers\n\n${markdownTable(drainHeader, here.map(drainCells), 1)}`);
  }
  const publishes = publishRows(results);
  if (publishes.length > 0) sections.push(`#### Publish throughput\n\n${markdownTable(publishHeader, publishes.map(publishCells), 3)}`);
  for (const database of publishDatabases(results)) {
    const keyed = keyedRows(results, database);
    if (keyed.length > 0) sections.push(`#### Keyed publishes, ${database}\n\n${markdownTable(keyedHeader, keyed.map(keyedCells), 1)}`);
  }
  const aims = aimRows(results);
  if (aims.length > 0) sections.push(`#### The aims\n\n${markdownTable(aimHeader, aims.map(aimCells), 3)}`);
  if (results.memory !== undefined) sections.push(`#### Memory\n\n${describeMemoryLine(results.memory)}`);
  return sections.join('\n\n');
}

const drainHeader = ['contender', 'msg/s median (min–max)', 'valid runs', '× raw loop', '× best peer', 'CPU µs/msg', 'deadlocks retried'];

function drainCells(row: DrainRow): string[] {
  const { point } = row;
  const valid = point.runs.filter((run) => run.isValid).length;
  return [
    point.label,
    formatSummary(point.median, point.min, point.max),
    `${valid}/${point.runs.length}`,
    formatRatio(row.toRaw),
    formatRatio(row.toBestPeer),
    point.medianCpuMicrosecondsPerMessage === undefined ? '–' : String(Math.round(point.medianCpuMicrosecondsPerMessage)),
    point.kind === 'service' ? String(point.deadlocksRetried) : '–',
  ];
}

const publishHeader = ['database', 'publish', 'by', 'rows/s median (min–max)', '× raw statements', '× plain publish', '× best peer bulk insert'];

function publishCells(row: PublishRow): string[] {
  const { point } = row;
  const peer = row.bestPeerLabel === undefined ? '' : ` (${row.bestPeerLabel}, ${formatRate(row.bestPeerRowsPerSecond!)})`;
  return [
    point.database,
    PUBLISH_MODE_LABELS[point.mode],
    PUBLISH_VARIANT_LABELS[point.variant],
    formatSummary(point.median, point.min, point.max),
    formatRatio(row.toRaw),
    formatRatio(row.toPlain),
    row.toBestPeer === undefined ? '–' : `${formatRatio(row.toBestPeer)}${peer}`,
  ];
}

const keyedHeader = ['publish', 'plain rows/s median (min–max)', 'keyed median (min–max)', 'keyed / plain', 'keyed / plain by round (min–max)'];

function keyedCells(row: KeyedRow): string[] {
  const { keyed, plain } = row;
  const what =
    keyed.variant === 'keyedDuplicate'
      ? 'one at a time, the one key held already (duplicates, publishes/s)'
      : keyed.mode === 'one'
        ? 'one at a time, a new key each (rows/s)'
        : 'publishMany, calls of 1,000, a new key each (rows/s)';
  const range = spread(row.roundRatios);
  return [
    what,
    plain === undefined ? 'not measured' : formatSummary(plain.median, plain.min, plain.max),
    formatSummary(keyed.median, keyed.min, keyed.max),
    formatRatio(row.toPlain),
    range === undefined ? '–' : range.min === range.max ? formatRatio(range.min) : `${formatRatio(range.min)}–${formatRatio(range.max)}`,
  ];
}

/** Databases with publish points, in the order they ran. */
function publishDatabases(results: SuiteResults): BenchDatabaseName[] {
  return [...new Set(results.publishes.map((point) => point.database))];
}

const aimHeader = ['aim', 'measured', 'against', 'ratio', 'target', 'reached'];

function aimCells(row: AimRow): string[] {
  return [row.aim, row.measured, row.against, formatRatio(row.ratio), `≥ ${row.target.toFixed(1)}`, row.isReached === undefined ? 'not measured' : row.isReached ? 'yes' : 'no'];
}

function describeMemoryLine(memory: MemoryResult | { readonly failure: string }): string {
  if ('failure' in memory) return `the memory drain failed: ${memory.failure}`;
  const drained = memory.measurement.isCut
    ? `cut short after ${memory.measurement.handled.toLocaleString('en-US')} rows`
    : `drained at ${formatRate(memory.measurement.messagesPerSecond)} msg/s, ${memory.remaining} rows left`;
  return (
    `${memory.label}, ${memory.workers} workers, ${memory.rows.toLocaleString('en-US')} rows on PostgreSQL (${drained}): ` +
    `RSS ${memory.startRssMiB.toFixed(0)} MiB at the start, ${memory.peakRssMiB.toFixed(0)} MiB at the peak, ${memory.endRssMiB.toFixed(0)} MiB at the end.`
  );
}

/** The (database, workers) pairs in the order they ran. */
function groups(results: SuiteResults): [BenchDatabaseName, number][] {
  const seen = new Map<string, [BenchDatabaseName, number]>();
  for (const point of results.drains) seen.set(`${point.database}/${point.workers}`, [point.database, point.workers]);
  return [...seen.values()];
}

function describePoint(point: DrainPoint | undefined): string {
  if (point?.median === undefined) return 'not measured';
  return `${point.label}: ${formatRate(point.median)} msg/s`;
}

function best(points: readonly DrainPoint[]): DrainPoint | undefined {
  return points.reduce<DrainPoint | undefined>((top, point) => (point.median !== undefined && (top?.median === undefined || point.median > top.median) ? point : top), undefined);
}

function ratio(value: number | undefined, reference: number | undefined): number | undefined {
  return value === undefined || reference === undefined || reference === 0 ? undefined : value / reference;
}

function middle(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const half = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[half]! : (sorted[half - 1]! + sorted[half]!) / 2;
}

export function formatRate(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

function formatRatio(value: number | undefined): string {
  return value === undefined ? '–' : value.toFixed(2);
}

function formatSummary(median: number | undefined, min: number | undefined, max: number | undefined): string {
  if (median === undefined) return 'no valid run';
  return min === max ? formatRate(median) : `${formatRate(median)} (${formatRate(min!)}–${formatRate(max!)})`;
}

function textTable(header: readonly string[], rows: readonly string[][]): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: readonly string[]) => cells.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd();
  return [line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

/** Columns from `firstNumeric` on are right-aligned. */
function markdownTable(header: readonly string[], rows: readonly string[][], firstNumeric: number): string {
  const align = header.map((_, column) => (column >= firstNumeric ? '---:' : '---'));
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(align), ...rows.map(line)].join('\n');
}
