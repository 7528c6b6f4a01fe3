import { DeclarationError } from '../errors.js';

/** What `GET /metrics` answers with: the Prometheus text exposition format, version 0.0.4. */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export interface MetricOptions {
  /** `[a-zA-Z_:][a-zA-Z0-9_:]*`; counters end in `_total`, units end the name (`_seconds`). */
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly string[];
}

export interface HistogramOptions extends MetricOptions {
  /** Upper bounds, finite and increasing; `+Inf` is added. */
  readonly buckets: readonly number[];
}

type MetricType = 'counter' | 'gauge' | 'histogram';

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** One sample series of a family: a counter, gauge or histogram with its label values fixed. */
interface Series {
  render(lines: string[], name: string, labels: string): void;
}

/** Only goes up. `inc` is a number addition: resolve the series once, count on it many times. */
export class Counter implements Series {
  #value = 0;

  get value(): number {
    return this.#value;
  }

  inc(by = 1): void {
    if (!(by >= 0)) throw new DeclarationError(`a counter only goes up; inc(${by}) would lower it`);
    this.#value += by;
  }

  /**
   * For a count kept elsewhere (a subscription's stats), copied in when metrics are read. The
   * count it copies must itself only go up.
   */
  setTotal(total: number): void {
    this.#value = total;
  }

  render(lines: string[], name: string, labels: string): void {
    lines.push(`${name}${braced(labels)} ${formatNumber(this.#value)}`);
  }
}

/** A value that goes up and down, usually set when metrics are read. */
export class Gauge implements Series {
  #value = 0;

  get value(): number {
    return this.#value;
  }

  set(value: number): void {
    this.#value = value;
  }

  render(lines: string[], name: string, labels: string): void {
    lines.push(`${name}${braced(labels)} ${formatNumber(this.#value)}`);
  }
}

/**
 * Observations counted into fixed buckets. `observe` adds to one bucket (found by a scan of at
 * most a dozen or so bounds), the sum and the count; the cumulative `le` counts are built only
 * when metrics are read.
 */
export class Histogram implements Series {
  readonly #bounds: readonly number[];
  /** Per bucket, not cumulative; the last one is above every bound (`+Inf`). */
  readonly #counts: Float64Array;
  #sum = 0;
  #count = 0;

  constructor(bounds: readonly number[]) {
    this.#bounds = bounds;
    this.#counts = new Float64Array(bounds.length + 1);
  }

  get count(): number {
    return this.#count;
  }

  get sum(): number {
    return this.#sum;
  }

  /** Ignores NaN, which no bucket can hold. */
  observe(value: number): void {
    if (Number.isNaN(value)) return;
    const bounds = this.#bounds;
    let index = 0;
    while (index < bounds.length && value > bounds[index]!) index += 1;
    this.#counts[index]! += 1;
    this.#sum += value;
    this.#count += 1;
  }

  render(lines: string[], name: string, labels: string): void {
    const prefix = labels === '' ? '' : `${labels},`;
    let cumulative = 0;
    this.#bounds.forEach((bound, index) => {
      cumulative += this.#counts[index]!;
      lines.push(`${name}_bucket{${prefix}le="${formatNumber(bound)}"} ${formatNumber(cumulative)}`);
    });
    lines.push(`${name}_bucket{${prefix}le="+Inf"} ${formatNumber(this.#count)}`);
    lines.push(`${name}_sum${braced(labels)} ${formatNumber(this.#sum)}`);
    lines.push(`${name}_count${braced(labels)} ${formatNumber(this.#count)}`);
  }
}

/**
 * A metric and its series, one per set of label values. `labels(...)` builds the label text once
 * and keeps the series, so callers resolve it once (per subscription) and then only count.
 */
export class MetricFamily<S extends Series> {
  readonly name: string;
  readonly help: string;
  readonly type: MetricType;
  readonly labelNames: readonly string[];
  readonly #create: () => S;
  readonly #series = new Map<string, { readonly labels: string; readonly series: S }>();

  constructor(options: MetricOptions, type: MetricType, create: () => S) {
    this.name = options.name;
    this.help = options.help;
    this.type = type;
    this.labelNames = options.labelNames ?? [];
    this.#create = create;
  }

  /** The series for these label values, in `labelNames` order; created on first use. */
  labels(...values: string[]): S {
    if (values.length !== this.labelNames.length) {
      throw new DeclarationError(
        `metric "${this.name}" has labels ${this.labelNames.join(', ') || '(none)'}; got ${values.length} value(s)`,
      );
    }
    const key = values.join('\u0000');
    let entry = this.#series.get(key);
    if (entry === undefined) {
      const labels = values.map((value, index) => `${this.labelNames[index]}="${escapeLabelValue(value)}"`).join(',');
      entry = { labels, series: this.#create() };
      this.#series.set(key, entry);
    }
    return entry.series;
  }

  render(lines: string[]): void {
    lines.push(`# HELP ${this.name} ${escapeHelp(this.help)}`);
    lines.push(`# TYPE ${this.name} ${this.type}`);
    for (const { labels, series } of this.#series.values()) series.render(lines, this.name, labels);
  }
}

/** Metric families in registration order, rendered as Prometheus text. No dependency. */
export class MetricRegistry {
  readonly #families = new Map<string, MetricFamily<Series>>();
  readonly #collectors: (() => void)[] = [];

  counter(options: MetricOptions): MetricFamily<Counter> {
    return this.#register(new MetricFamily(options, 'counter', () => new Counter()));
  }

  gauge(options: MetricOptions): MetricFamily<Gauge> {
    return this.#register(new MetricFamily(options, 'gauge', () => new Gauge()));
  }

  histogram(options: HistogramOptions): MetricFamily<Histogram> {
    const { buckets } = options;
    const isIncreasing = buckets.every((bound, index) => Number.isFinite(bound) && (index === 0 || bound > buckets[index - 1]!));
    if (buckets.length === 0 || !isIncreasing) {
      throw new DeclarationError(`histogram "${options.name}": buckets must be finite upper bounds in increasing order`);
    }
    if (options.labelNames?.includes('le')) {
      throw new DeclarationError(`histogram "${options.name}": "le" is the bucket label; choose another label name`);
    }
    const bounds = [...buckets];
    return this.#register(new MetricFamily(options, 'histogram', () => new Histogram(bounds)));
  }

  /**
   * Runs before every `render`: copies values kept elsewhere (pool counts, a subscription's
   * stats) into gauges and counters, so they cost nothing between reads.
   */
  addCollector(collect: () => void): void {
    this.#collectors.push(collect);
  }

  /** The text exposition format 0.0.4: HELP and TYPE for every family, then its samples. */
  render(): string {
    for (const collect of this.#collectors) collect();
    const lines: string[] = [];
    for (const family of this.#families.values()) family.render(lines);
    return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
  }

  #register<S extends Series>(family: MetricFamily<S>): MetricFamily<S> {
    if (!METRIC_NAME.test(family.name)) {
      throw new DeclarationError(`metric name "${family.name}" is not valid; use letters, digits, "_" and ":"`);
    }
    for (const label of family.labelNames) {
      if (!LABEL_NAME.test(label) || label.startsWith('__')) {
        throw new DeclarationError(`metric "${family.name}": label name "${label}" is not valid; use letters, digits and "_"`);
      }
    }
    if (this.#families.has(family.name)) throw new DeclarationError(`metric "${family.name}" is registered twice`);
    this.#families.set(family.name, family as unknown as MetricFamily<Series>);
    return family;
  }
}

/** Go's float spelling as Prometheus reads it: `+Inf`, `-Inf`, `NaN`, otherwise the shortest decimal. */
export function formatNumber(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Number.POSITIVE_INFINITY) return '+Inf';
  if (value === Number.NEGATIVE_INFINITY) return '-Inf';
  return String(value);
}

/** Label values escape backslash, double quote and line feed. */
export function escapeLabelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (character) => (character === '\n' ? '\\n' : `\\${character}`));
}

/** HELP text escapes backslash and line feed (a double quote stays as it is). */
export function escapeHelp(text: string): string {
  return text.replace(/[\\\n]/g, (character) => (character === '\n' ? '\\n' : '\\\\'));
}

function braced(labels: string): string {
  return labels === '' ? '' : `{${labels}}`;
}
