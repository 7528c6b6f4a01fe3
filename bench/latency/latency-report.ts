import { describeMode, formatMs, type LatencyRecord } from './latency-benchmark.js';

/** The results as a fixed-width table: one row per run, latencies in milliseconds. */
export function formatLatencyTable(records: readonly LatencyRecord[]): string {
  const header = ['database', 'form', 'mode', 'poll ms', 'handled', 'p50 ms', 'p99 ms', 'max ms', 'load'];
  const rows = records.map((record) => [
    record.database,
    record.form === 'rowLock' ? 'row lock' : 'lease',
    describeMode(record.mode),
    String(record.pollIntervalMs),
    record.isValid ? String(record.handled) : `${record.handled} (not counted)`,
    formatMs(record.p50),
    formatMs(record.p99),
    formatMs(record.max),
    record.loadAverage.toFixed(1),
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const isNumeric = (column: number) => column >= 3;
  const line = (cells: string[]) =>
    cells.map((cell, column) => (isNumeric(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join('  ');
  return [line(header), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}
