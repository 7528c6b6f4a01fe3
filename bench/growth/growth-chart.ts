import type { DrainGrowthPoint } from './growth-benchmark.js';
import { formatCount, type GrowthResults } from './growth-report.js';
import { svgDocument, svgText as text } from '../svg-text.js';

const WIDTH = 960;
const PANEL_WIDTH = 440;
const PANEL_HEIGHT = 230;
const PLOT_LEFT = 64;
const PLOT_RIGHT = 16;
const PLOT_TOP = 34;
const PLOT_BOTTOM = 40;
/** tablequeue's lines in blues and violet, the peers' in orange, red, green and brown. */
const SERVICE_COLOURS = ['#1d4ed8', '#0891b2', '#7c3aed'];
const PEER_COLOURS = ['#ea580c', '#b91c1c', '#65a30d', '#a16207'];

interface Series {
  readonly label: string;
  readonly colour: string;
  readonly isDashed: boolean;
  readonly points: readonly { readonly x: number; readonly y: number }[];
}

/**
 * The growth curves as one SVG, as the suite's chart is drawn (by hand: lines, circles, text):
 * per database a panel of drain msg/s against the backlog (solid: due rows alone, dashed: with
 * the delayed rows beside them), one of the claim statement's p50 time, and one of publish
 * rows/s against the rows already in the table. Both axes logarithmic.
 */
export function renderGrowthChart(results: GrowthResults): string {
  const parts: string[] = [];
  let y = 26;
  parts.push(text(16, y, `Against the backlog (log–log): ${describeTimed(results)}`, { size: 15, weight: 'bold' }));
  const load = results.machine.loadAverage;
  y += 20;
  const loads = results.drains.map((point) => point.loadAverage);
  const range = loads.length === 0 ? `${load[0].toFixed(1)} at start` : `${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} over the drains`;
  parts.push(text(16, y, `one run per point · ${results.startedAt.slice(0, 10)} · ${results.machine.cpuCount} × ${results.machine.cpuModel} · load average ${range} · library from ${results.machine.library}`, { size: 12, fill: '#4b5563' }));
  y += 14;
  const databases = [...new Set([...results.drains.map((point) => point.database), ...results.publishes.map((point) => point.database)])];
  const panels: { title: string; series: Series[]; unit: string }[] = [];
  for (const database of databases) {
    const drains = results.drains.filter((point) => point.database === database && (point.part === 'drain' || point.part === 'delayed') && point.isValid);
    if (drains.length > 0) {
      panels.push({ title: `${database}: drain msg/s against due rows`, series: drainSeries(drains, (point) => point.messagesPerSecond), unit: 'msg/s' });
      const claims = drains.filter((point) => point.claim?.p50Ms !== undefined);
      if (claims.length > 0) panels.push({ title: `${database}: claim statement p50 ms`, series: drainSeries(claims, (point) => point.claim?.p50Ms), unit: 'ms' });
    }
    const publishes = results.publishes.filter((point) => point.database === database && point.rowsPerSecond !== undefined && point.tableRows > 0);
    if (publishes.length > 0) {
      const series = (['one', 'many'] as const).map((mode, index) => ({
        label: mode === 'one' ? 'publish, one at a time' : 'publishMany',
        colour: SERVICE_COLOURS[index]!,
        isDashed: false,
        points: publishes.filter((point) => point.mode === mode).map((point) => ({ x: point.tableRows, y: point.rowsPerSecond! })),
      }));
      panels.push({ title: `${database}: publish rows/s against rows in the table`, series, unit: 'rows/s' });
    }
  }
  for (let index = 0; index < panels.length; index += 2) {
    const row = panels.slice(index, index + 2);
    const legends = row.map((panel, column) => renderPanel(panel.title, panel.series, panel.unit, 16 + column * (PANEL_WIDTH + 48), y));
    parts.push(...legends.map((panel) => panel.svg));
    y = Math.max(...legends.map((panel) => panel.bottom)) + 16;
  }
  const height = Math.ceil(y);
  return svgDocument(WIDTH, height, parts);
}

/** The messages timed per drain, per database when merged runs timed different counts. */
function describeTimed(results: GrowthResults): string {
  const byDatabase = new Map<string, number>();
  for (const point of results.drains) byDatabase.set(point.database, Math.max(byDatabase.get(point.database) ?? 0, point.timed));
  const counts = [...new Set(byDatabase.values())];
  if (counts.length <= 1) return `the first ${formatCount(counts[0] ?? results.settings.first)} messages of each backlog`;
  return `the first ${[...byDatabase].map(([database, timed]) => `${formatCount(timed)} (${database})`).join(', ')} messages of each`;
}

function drainSeries(points: readonly DrainGrowthPoint[], value: (point: DrainGrowthPoint) => number | undefined): Series[] {
  const labels = [...new Set(points.map((point) => point.label))];
  const series: Series[] = [];
  let services = 0;
  let peers = 0;
  for (const label of labels) {
    const mine = points.filter((point) => point.label === label);
    const colour = mine[0]!.kind === 'service' ? SERVICE_COLOURS[services++ % SERVICE_COLOURS.length]! : PEER_COLOURS[peers++ % PEER_COLOURS.length]!;
    for (const part of ['drain', 'delayed'] as const) {
      const line = mine
        .filter((point) => point.part === part)
        .flatMap((point) => {
          const y = value(point);
          return y === undefined || y <= 0 ? [] : [{ x: point.backlog, y }];
        })
        .sort((a, b) => a.x - b.x);
      if (line.length > 0) series.push({ label: part === 'delayed' ? `${label}, + delayed` : label, colour, isDashed: part === 'delayed', points: line });
    }
  }
  return series;
}

function renderPanel(title: string, series: readonly Series[], unit: string, left: number, top: number): { svg: string; bottom: number } {
  const parts = [text(left, top + 18, `${title} (${unit})`, { size: 13, weight: 'bold' })];
  const xs = series.flatMap((line) => line.points.map((point) => point.x));
  const ys = series.flatMap((line) => line.points.map((point) => point.y));
  // Whole decades around the points; a point on a power of ten ends its axis there.
  const decade = (value: number, round: (power: number) => number) => 10 ** round(Math.log10(value) + (round === Math.ceil ? -1e-9 : 1e-9));
  const xLow = decade(Math.min(...xs), Math.floor);
  const xHigh = Math.max(decade(Math.max(...xs), Math.ceil), xLow * 10);
  const yLow = decade(Math.min(...ys), Math.floor);
  const yHigh = Math.max(decade(Math.max(...ys), Math.ceil), yLow * 10);
  const plotLeft = left + PLOT_LEFT;
  const plotWidth = PANEL_WIDTH - PLOT_LEFT - PLOT_RIGHT;
  const plotTop = top + PLOT_TOP;
  const plotHeight = PANEL_HEIGHT - PLOT_TOP - PLOT_BOTTOM;
  const xOf = (x: number) => plotLeft + ((Math.log10(x) - Math.log10(xLow)) / Math.max(1e-9, Math.log10(xHigh) - Math.log10(xLow))) * plotWidth;
  const yOf = (y: number) => plotTop + plotHeight - ((Math.log10(y) - Math.log10(yLow)) / Math.max(1e-9, Math.log10(yHigh) - Math.log10(yLow))) * plotHeight;
  for (let tick = yLow; tick <= yHigh * 1.0001; tick *= 10) {
    parts.push(`<line x1="${plotLeft}" y1="${yOf(tick).toFixed(1)}" x2="${plotLeft + plotWidth}" y2="${yOf(tick).toFixed(1)}" stroke="#e5e7eb"/>`);
    parts.push(text(plotLeft - 6, yOf(tick) + 4, tick >= 1 ? formatCount(tick) : String(tick), { size: 10, anchor: 'end', fill: '#6b7280' }));
  }
  for (let tick = xLow; tick <= xHigh * 1.0001; tick *= 10) {
    parts.push(`<line x1="${xOf(tick).toFixed(1)}" y1="${plotTop}" x2="${xOf(tick).toFixed(1)}" y2="${plotTop + plotHeight}" stroke="#e5e7eb"/>`);
    parts.push(text(xOf(tick), plotTop + plotHeight + 13, formatCount(tick), { size: 10, anchor: 'middle', fill: '#6b7280' }));
  }
  for (const line of series) {
    const coordinates = line.points.map((point) => `${xOf(point.x).toFixed(1)},${yOf(point.y).toFixed(1)}`).join(' ');
    parts.push(`<polyline points="${coordinates}" fill="none" stroke="${line.colour}" stroke-width="2"${line.isDashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    for (const point of line.points) parts.push(`<circle cx="${xOf(point.x).toFixed(1)}" cy="${yOf(point.y).toFixed(1)}" r="3" fill="${line.colour}"/>`);
  }
  let legendY = plotTop + plotHeight + 30;
  for (const line of series) {
    parts.push(`<line x1="${left}" y1="${legendY - 4}" x2="${left + 22}" y2="${legendY - 4}" stroke="${line.colour}" stroke-width="2"${line.isDashed ? ' stroke-dasharray="6 4"' : ''}/>`);
    parts.push(text(left + 28, legendY, line.label, { size: 10 }));
    legendY += 13;
  }
  return { svg: parts.join('\n'), bottom: legendY };
}
