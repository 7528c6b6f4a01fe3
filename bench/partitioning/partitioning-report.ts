import { describeForm, type PointResult, type VariantSummary } from './partitioning-benchmark.js';

/** The results as a fixed-width table: median (min–max) messages per second, and the ratio. */
export function formatPartitioningTable(points: readonly PointResult[]): string {
  const header = [
    'database',
    'form',
    'workers',
    'service msg/s (min–max)',
    'raw msg/s (min–max)',
    'service/raw',
    'CPU µs/msg service, raw',
  ];
  const rows = points.map((point) => [
    point.database,
    describeForm(point.form),
    String(point.workers),
    formatSummary(point.service),
    formatSummary(point.raw),
    point.ratio === undefined ? '–' : point.ratio.toFixed(2),
    `${formatMicroseconds(point.service)}, ${formatMicroseconds(point.raw)}`,
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const isNumeric = (column: number) => column >= 2;
  const line = (cells: string[]) =>
    cells.map((cell, column) => (isNumeric(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join('  ');
  return [line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

function formatSummary(summary: VariantSummary): string {
  const counted = summary.runs.filter((run) => run.isValid).length;
  if (summary.median === undefined) return `no valid run of ${summary.runs.length}`;
  const range = `${formatRate(summary.min!)}–${formatRate(summary.max!)}`;
  const missing = counted < summary.runs.length ? ` [${counted}/${summary.runs.length} valid]` : '';
  return `${formatRate(summary.median)} (${range})${missing}`;
}

function formatRate(messagesPerSecond: number): string {
  return Math.round(messagesPerSecond).toLocaleString('en-US');
}

function formatMicroseconds(summary: VariantSummary): string {
  const value = summary.medianCpuMicrosecondsPerMessage;
  return value === undefined ? '–' : String(Math.round(value));
}
