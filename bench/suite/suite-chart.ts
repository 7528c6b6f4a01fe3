import type { ContenderKind } from './contender.js';
import type { MemoryResult } from './memory-drain.js';
import type { DrainPoint } from './suite-benchmark.js';
import { formatRate, type SuiteResults } from './suite-report.js';
import { svgDocument, svgText as text } from '../svg-text.js';

const WIDTH = 960;
const LABEL_WIDTH = 350;
const BAR_AREA = 450;
const BAR_HEIGHT = 16;
const BAR_GAP = 6;
const PANEL_TITLE = 30;
const PANEL_GAP = 18;
const MEMORY_HEIGHT = 170;

const KIND_COLOURS: Readonly<Record<ContenderKind, string>> = {
  service: '#2563eb',
  raw: '#9ca3af',
  peer: '#ea580c',
};

const KIND_NAMES: Readonly<Record<ContenderKind, string>> = {
  service: 'tablequeue',
  raw: 'raw loop of the same statements',
  peer: 'peer',
};

/**
 * The drain figures of a results file as an SVG: a panel per database and worker count, a bar
 * per contender at its median with a line over its min–max, then RSS over the memory drain.
 * Written by hand (no charting library): rectangles, lines and text.
 */
export function renderSuiteChart(results: SuiteResults): string {
  const parts: string[] = [];
  let y = 0;
  const title = `tablequeue and its peers: messages per second (log scale) draining ${results.settings.messages.toLocaleString('en-US')} no-op messages`;
  parts.push(text(16, (y += 26), title, { size: 16, weight: 'bold' }));
  const load = results.machine.loadAverage;
  const subtitle = `median of ${results.settings.rounds} interleaved round(s), line = min–max · ${results.startedAt.slice(0, 10)} · ${results.machine.cpuCount} × ${results.machine.cpuModel} · load average at start ${load[0].toFixed(1)} · library from ${results.machine.library ?? 'src/ through tsx'}`;
  parts.push(text(16, (y += 20), subtitle, { size: 12, fill: '#4b5563' }));
  y += 12;
  parts.push(legend(16, y));
  y += 24;
  for (const [database, workers] of groupsOf(results.drains)) {
    const points = results.drains.filter((point) => point.database === database && point.workers === workers);
    const panel = renderPanel(`${database}, ${workers} workers`, points, y);
    parts.push(panel.svg);
    y = panel.bottom + PANEL_GAP;
  }
  if (results.memory !== undefined && !('failure' in results.memory)) {
    const panel = renderMemory(results.memory, y);
    parts.push(panel.svg);
    y = panel.bottom + PANEL_GAP;
  }
  const height = Math.ceil(y);
  return svgDocument(WIDTH, height, parts);
}

function renderPanel(title: string, points: readonly DrainPoint[], top: number): { svg: string; bottom: number } {
  const parts = [text(16, top + 20, title, { size: 14, weight: 'bold' })];
  // A logarithmic axis: equal ratios are equal distances, from a per-message loop to a batch.
  const values = points.flatMap((point) => [point.min, point.max]).filter((value): value is number => value !== undefined && value > 0);
  const low = 10 ** Math.floor(Math.log10(Math.max(1, Math.min(...values, 1e9))));
  const high = niceCeiling(Math.max(low * 10, ...values));
  const x0 = LABEL_WIDTH;
  const scale = (value: number) => x0 + ((Math.log10(Math.max(value, low)) - Math.log10(low)) / (Math.log10(high) - Math.log10(low))) * BAR_AREA;
  let y = top + PANEL_TITLE;
  const bottomOfBars = y + points.length * (BAR_HEIGHT + BAR_GAP);
  for (const tick of logTicks(low, high)) {
    const x = scale(tick);
    parts.push(`<line x1="${x.toFixed(1)}" y1="${y - 4}" x2="${x.toFixed(1)}" y2="${bottomOfBars}" stroke="#e5e7eb"/>`);
    parts.push(text(x, bottomOfBars + 12, formatRate(tick), { size: 10, anchor: 'middle', fill: '#6b7280' }));
  }
  for (const point of points) {
    parts.push(text(x0 - 8, y + BAR_HEIGHT - 4, point.label, { size: 12, anchor: 'end' }));
    if (point.median === undefined) {
      parts.push(text(x0 + 4, y + BAR_HEIGHT - 4, 'no valid run', { size: 11, fill: '#b91c1c' }));
    } else {
      const width = Math.max(1, scale(point.median) - x0);
      parts.push(`<rect x="${x0}" y="${y}" width="${width.toFixed(1)}" height="${BAR_HEIGHT}" fill="${KIND_COLOURS[point.kind]}"/>`);
      const middle = y + BAR_HEIGHT / 2;
      if (point.min !== undefined && point.max !== undefined && point.max > point.min) {
        const [from, to] = [scale(point.min), scale(point.max)];
        parts.push(`<line x1="${from.toFixed(1)}" y1="${middle}" x2="${to.toFixed(1)}" y2="${middle}" stroke="#111827" stroke-width="1.5"/>`);
        for (const x of [from, to]) parts.push(`<line x1="${x.toFixed(1)}" y1="${middle - 4}" x2="${x.toFixed(1)}" y2="${middle + 4}" stroke="#111827" stroke-width="1.5"/>`);
      }
      const valueX = Math.max(scale(point.median), scale(point.max ?? point.median)) + 6;
      parts.push(text(valueX, y + BAR_HEIGHT - 4, formatRate(point.median), { size: 11 }));
    }
    y += BAR_HEIGHT + BAR_GAP;
  }
  return { svg: parts.join('\n'), bottom: bottomOfBars + 16 };
}

function renderMemory(memory: MemoryResult, top: number): { svg: string; bottom: number } {
  const title = `RSS in MiB while ${memory.label}, ${memory.workers} workers, drains ${memory.rows.toLocaleString('en-US')} rows on postgres`;
  const parts = [text(16, top + 20, title, { size: 14, weight: 'bold' })];
  const x0 = 80;
  const plotWidth = WIDTH - x0 - 40;
  const plotTop = top + PANEL_TITLE + 6;
  const plotHeight = MEMORY_HEIGHT - PANEL_TITLE - 30;
  const lastSecond = Math.max(1, ...memory.samples.map((sample) => sample.atSeconds));
  const rssMax = niceCeiling(Math.max(1, ...memory.samples.map((sample) => sample.rssMiB)));
  const xOf = (seconds: number) => x0 + (seconds / lastSecond) * plotWidth;
  const yOf = (mib: number) => plotTop + plotHeight - (mib / rssMax) * plotHeight;
  for (const tick of ticks(rssMax)) {
    parts.push(`<line x1="${x0}" y1="${yOf(tick).toFixed(1)}" x2="${x0 + plotWidth}" y2="${yOf(tick).toFixed(1)}" stroke="#e5e7eb"/>`);
    parts.push(text(x0 - 6, yOf(tick) + 4, formatRate(tick), { size: 10, anchor: 'end', fill: '#6b7280' }));
  }
  const line = memory.samples.map((sample) => `${xOf(sample.atSeconds).toFixed(1)},${yOf(sample.rssMiB).toFixed(1)}`).join(' ');
  parts.push(`<polyline points="${line}" fill="none" stroke="${KIND_COLOURS.service}" stroke-width="2"/>`);
  const axisY = plotTop + plotHeight + 14;
  parts.push(text(x0, axisY, '0 s', { size: 10, fill: '#6b7280' }));
  parts.push(text(x0 + plotWidth, axisY, `${lastSecond.toFixed(0)} s`, { size: 10, anchor: 'end', fill: '#6b7280' }));
  const summary = `start ${memory.startRssMiB.toFixed(0)} MiB · peak ${memory.peakRssMiB.toFixed(0)} MiB · end ${memory.endRssMiB.toFixed(0)} MiB`;
  parts.push(text(x0 + plotWidth / 2, axisY, summary, { size: 11, anchor: 'middle' }));
  return { svg: parts.join('\n'), bottom: axisY + 6 };
}

function legend(x: number, y: number): string {
  const parts: string[] = [];
  let left = x;
  for (const kind of ['service', 'raw', 'peer'] as const) {
    parts.push(`<rect x="${left}" y="${y}" width="12" height="12" fill="${KIND_COLOURS[kind]}"/>`);
    parts.push(text(left + 18, y + 10, KIND_NAMES[kind], { size: 12 }));
    left += 40 + KIND_NAMES[kind].length * 6.5;
  }
  return parts.join('\n');
}

function groupsOf(points: readonly DrainPoint[]): [string, number][] {
  const seen = new Map<string, [string, number]>();
  for (const point of points) seen.set(`${point.database}/${point.workers}`, [point.database, point.workers]);
  return [...seen.values()];
}

/** 1, 2 or 5 times a power of ten, at or above `value`. */
function niceCeiling(value: number): number {
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

/** 1, 2 and 5 times each power of ten from `low` to `high`. */
function logTicks(low: number, high: number): number[] {
  const ticks: number[] = [];
  for (let power = low; power <= high; power *= 10) {
    for (const step of [1, 2, 5]) if (step * power <= high) ticks.push(step * power);
  }
  return ticks;
}

function ticks(scaleMax: number): number[] {
  const step = scaleMax / 5;
  return Array.from({ length: 6 }, (_, index) => index * step);
}
