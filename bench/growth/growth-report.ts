import type { BenchDatabaseName } from '../bench-database.js';
import type { MachineDescription } from '../machine.js';
import type { DrainGrowthPoint, GrowthOutcome, GrowthSettings } from './growth-benchmark.js';

/** What `npm run bench -- growth` writes: the settings, the machine, and every point. */
export interface GrowthResults extends Omit<GrowthOutcome, 'isInterrupted'> {
  readonly benchmark: 'growth';
  readonly command: string;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly isInterrupted: boolean;
  readonly settings: Omit<GrowthSettings, 'contenders' | 'servers'> & { readonly contenders: readonly string[] };
  readonly machine: MachineDescription;
  readonly loadAverageAtEnd: readonly [number, number, number];
}

export function formatCount(value: number): string {
  if (value >= 1_000_000 && value % 1_000_000 === 0) return `${value / 1_000_000}M`;
  if (value >= 1_000 && value % 1_000 === 0) return `${value / 1_000}k`;
  return value.toLocaleString('en-US');
}

function rate(value: number | undefined): string {
  return value === undefined ? '–' : Math.round(value).toLocaleString('en-US');
}

function ms(value: number | undefined): string {
  if (value === undefined) return '–';
  return value < 10 ? value.toFixed(2) : value.toFixed(1);
}

/** The Markdown tables docs/benchmarks.md carries, one per part and database. */
export function formatGrowthMarkdown(results: GrowthResults): string {
  const sections: string[] = [];
  const databases = [...new Set([...results.drains.map((point) => point.database), ...results.publishes.map((point) => point.database)])];
  for (const part of ['drain', 'delayed'] as const) {
    for (const database of databases) {
      const points = results.drains.filter((point) => point.part === part && point.database === database);
      if (points.length === 0) continue;
      const delayed = part === 'delayed' ? ` with ${formatCount(results.settings.delayedRows)} rows delayed a day in the same table` : '';
      // Read from the points, not the settings: runs merged by --report may have timed different counts.
      const timed = Math.max(...points.map((point) => point.timed));
      sections.push(`**${database}, ${points[0]!.workers} workers: msg/s over the first ${formatCount(timed)} of a backlog${delayed}** (claim p50 / p99 ms)\n\n${drainTable(points)}`);
    }
  }
  const claimDetail = results.drains.filter((point) => point.database === 'postgres' && (point.part === 'drain' || point.part === 'delayed') && point.claim?.pagesP50 !== undefined);
  if (claimDetail.length > 0) sections.push(`**postgres: what the claim's scan read** (median over the probes: buffers touched / rows its filter dropped)\n\n${claimTable(claimDetail)}`);
  const groups = results.drains.filter((point) => point.part === 'groups');
  if (groups.length > 0) sections.push(`**One queue among many**: the ${formatCount(groups[0]!.backlog)} rows of one queue drained, alone in the table or among ${formatCount(results.settings.groupRows)} rows of ${results.settings.groups} queues\n\n${groupsTable(groups)}`);
  const fifo = results.drains.filter((point) => point.part === 'fifo');
  if (fifo.length > 0) sections.push(`**One FIFO group**: msg/s over the first messages of a backlog in one FIFO group, ${fifo[0]!.label} (one in work at a time)\n\n${fifoTable(fifo)}`);
  if (results.publishes.length > 0) sections.push(`**Publish rows/s into a table already holding N rows** (one at a time: ${results.settings.publishOne.toLocaleString('en-US')} awaited publishes; publishMany: ${results.settings.publishMany.toLocaleString('en-US')} rows in calls of 1,000)\n\n${publishTable(results)}`);
  if (results.latencies.length > 0) sections.push(`**Publish-to-handler latency across processes, postgres** (${results.settings.latencyMessages} messages, one every ${results.settings.latencyIntervalMs} ms, beside a backlog draining in another queue of the same table)\n\n${latencyTable(results)}`);
  return sections.join('\n\n');
}

function drainTable(points: readonly DrainGrowthPoint[]): string {
  const backlogs = [...new Set(points.map((point) => point.backlog))].sort((a, b) => a - b);
  const labels = [...new Set(points.map((point) => point.label))];
  const rows = [`| | ${backlogs.map(formatCount).join(' | ')} |`, `|---|${backlogs.map(() => '---:').join('|')}|`];
  for (const label of labels) {
    const cells = backlogs.map((backlog) => {
      const point = points.find((candidate) => candidate.label === label && candidate.backlog === backlog);
      if (point === undefined) return '';
      if (!point.isValid) return 'not counted';
      const claim = point.claim?.p50Ms === undefined ? '' : ` (${ms(point.claim.p50Ms)} / ${ms(point.claim.p99Ms)})`;
      return `${rate(point.messagesPerSecond)}${claim}`;
    });
    rows.push(`| ${label} | ${cells.join(' | ')} |`);
  }
  return rows.join('\n');
}

function claimTable(points: readonly DrainGrowthPoint[]): string {
  const rows = ['| | backlog | delayed | scan | pages (not in shared buffers) | rows filtered | claim p50 ms |', '|---|---:|---:|---|---:|---:|---:|'];
  for (const point of points) {
    const claim = point.claim!;
    rows.push(`| ${point.label} | ${formatCount(point.backlog)} | ${formatCount(point.delayed)} | ${claim.scan ?? '–'} | ${claim.pagesP50}${claim.pagesReadP50 === undefined ? '' : ` (${claim.pagesReadP50})`} | ${claim.rowsRemovedByFilterP50} | ${ms(claim.p50Ms)} |`);
  }
  return rows.join('\n');
}

function groupsTable(points: readonly DrainGrowthPoint[]): string {
  const rows = ['| database | | queues in the table | rows in the table | msg/s | claim p50 / p99 ms |', '|---|---|---:|---:|---:|---:|'];
  for (const point of points) {
    const claim = point.claim === undefined ? '–' : `${ms(point.claim.p50Ms)} / ${ms(point.claim.p99Ms)}`;
    rows.push(`| ${point.database} | ${point.label} | ${point.groups} | ${formatCount(point.tableRows)} | ${point.isValid ? rate(point.messagesPerSecond) : 'not counted'} | ${claim} |`);
  }
  return rows.join('\n');
}

function fifoTable(points: readonly DrainGrowthPoint[]): string {
  const rows = ['| database | rows in the group | timed | msg/s | claim p50 / p99 ms | claim pages (postgres) |', '|---|---:|---:|---:|---:|---:|'];
  for (const point of points) {
    const claim = point.claim === undefined ? '–' : `${ms(point.claim.p50Ms)} / ${ms(point.claim.p99Ms)}`;
    rows.push(`| ${point.database} | ${formatCount(point.backlog)} | ${formatCount(point.timed)} | ${point.isValid ? rate(point.messagesPerSecond) : `not counted: ${point.failure}`} | ${claim} | ${point.claim?.pagesP50 ?? '–'} |`);
  }
  return rows.join('\n');
}

function publishTable(results: GrowthResults): string {
  const sizes = [...new Set(results.publishes.map((point) => point.tableRows))].sort((a, b) => a - b);
  const rows = [`| | ${sizes.map((size) => `into ${formatCount(size)}`).join(' | ')} |`, `|---|${sizes.map(() => '---:').join('|')}|`];
  const databases: BenchDatabaseName[] = [...new Set(results.publishes.map((point) => point.database))];
  for (const database of databases) {
    for (const mode of ['one', 'many'] as const) {
      const cells = sizes.map((size) => {
        const point = results.publishes.find((candidate) => candidate.database === database && candidate.mode === mode && candidate.tableRows === size);
        return point === undefined ? '' : point.rowsPerSecond === undefined ? 'failed' : rate(point.rowsPerSecond);
      });
      rows.push(`| ${database}, ${mode === 'one' ? 'one at a time' : 'publishMany'} | ${cells.join(' | ')} |`);
    }
  }
  return rows.join('\n');
}

function latencyTable(results: GrowthResults): string {
  const rows = ['| backlog in the other queue | p50 ms | p99 ms | max ms | backlog messages handled meanwhile |', '|---:|---:|---:|---:|---:|'];
  for (const point of results.latencies) {
    if (!point.isValid) rows.push(`| ${formatCount(point.backlog)} | not counted: ${point.failure} | | | |`);
    else rows.push(`| ${formatCount(point.backlog)} | ${ms(point.p50)} | ${ms(point.p99)} | ${ms(point.max)} | ${point.backlogHandled.toLocaleString('en-US')} |`);
  }
  return rows.join('\n');
}
