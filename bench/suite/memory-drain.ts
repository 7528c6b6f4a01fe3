import { createBenchDatabase, type BenchServers } from '../bench-database.js';
import { countRemainingRows, createBenchTable, fillBenchTable, type BenchForm } from '../partitioning/bench-table.js';
import type { DrainMeasurement } from '../partitioning/drain-watch.js';
import { drainWithService, type ExtraSubscribeOptions } from '../partitioning/service-drain.js';

/** How often the resident set size is read while draining. */
const SAMPLE_INTERVAL_MS = 1_000;
const MIB = 2 ** 20;

export interface MemorySettings {
  readonly rows: number;
  readonly workers: number;
  readonly form: BenchForm;
  readonly batch: number | undefined;
  readonly extraOptions: ExtraSubscribeOptions;
  /** What the results call this configuration. */
  readonly label: string;
  readonly servers: BenchServers;
  readonly signal: AbortSignal;
}

export interface MemorySample {
  /** Seconds since the drain began (the broker's start). */
  readonly atSeconds: number;
  readonly rssMiB: number;
  readonly heapUsedMiB: number;
}

export interface MemoryResult {
  readonly label: string;
  readonly rows: number;
  readonly workers: number;
  readonly measurement: DrainMeasurement;
  readonly remaining: number;
  /** Right before the drain began, after the fill. */
  readonly startRssMiB: number;
  readonly peakRssMiB: number;
  /** After the last row was handled and the broker stopped. */
  readonly endRssMiB: number;
  readonly samples: MemorySample[];
}

/**
 * Drains `rows` rows on PostgreSQL with one service configuration and reads this process's RSS
 * every second: start, peak and end show whether memory stays flat while rows stream through.
 */
export async function measureMemoryWhileDraining(settings: MemorySettings): Promise<MemoryResult> {
  const database = await createBenchDatabase('postgres', settings.servers);
  try {
    const table = createBenchTable(settings.form);
    await fillBenchTable(database, table, settings.rows);
    const samples: MemorySample[] = [];
    const startedAt = performance.now();
    const sample = () => {
      const usage = process.memoryUsage();
      samples.push({
        atSeconds: (performance.now() - startedAt) / 1000,
        rssMiB: usage.rss / MIB,
        heapUsedMiB: usage.heapUsed / MIB,
      });
    };
    sample();
    const timer = setInterval(sample, SAMPLE_INTERVAL_MS);
    let measurement: DrainMeasurement;
    try {
      measurement = await drainWithService(
        {
          database,
          table,
          workers: settings.workers,
          messages: settings.rows,
          signal: settings.signal,
          ...(settings.batch === undefined ? {} : { batch: settings.batch }),
        },
        settings.extraOptions,
      );
    } finally {
      clearInterval(timer);
    }
    sample();
    const rss = samples.map((each) => each.rssMiB);
    return {
      label: settings.label,
      rows: settings.rows,
      workers: settings.workers,
      measurement,
      remaining: await countRemainingRows(database),
      startRssMiB: rss[0]!,
      peakRssMiB: Math.max(...rss),
      endRssMiB: rss.at(-1)!,
      samples,
    };
  } finally {
    await database.drop().catch((error: unknown) => {
      console.error(`could not drop the benchmark database at ${database.url}; remove it by hand:`, error);
    });
  }
}
