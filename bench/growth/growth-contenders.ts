import type { BenchDatabase, BenchDatabaseName } from '../bench-database.js';
import type { DrainMeasurement } from '../partitioning/drain-watch.js';
import { drainWithService, type ExtraSubscribeOptions } from '../partitioning/service-drain.js';
import { graphileWorkerContenders } from '../peers/graphile-worker-drain.js';
import { pgBossContender } from '../peers/pg-boss-drain.js';
import { plainjobContenders } from '../peers/plainjob-drain.js';
import { SUITE_BATCH, SUITE_PREFETCH } from '../suite/library-contenders.js';
import { ClaimProbe, type ClaimTiming } from './claim-probe.js';
import type { QueueTable } from '../../src/definition/define-table.js';
import { countRows, dropGrowthTable, fillGrowthTable, growthTable, type FillBlock } from './growth-table.js';

/** One growth drain: `backlog` rows due and `delayed` rows a day ahead, of which the first `first` are timed. */
export interface GrowthDrainRun {
  readonly database: BenchDatabase;
  readonly workers: number;
  readonly backlog: number;
  readonly delayed: number;
  readonly first: number;
  /** PostgreSQL storage parameters for tablequeue's table (`--storage`); peers ignore it. */
  readonly storage: string | undefined;
  readonly signal: AbortSignal;
}

export interface GrowthDrainOutcome {
  readonly measurement: DrainMeasurement;
  /** tablequeue only: the claim statement's time while the drain ran. */
  readonly claim: ClaimTiming | undefined;
  /** tablequeue only: rows left, checked against the rows handled (each handled row deleted once). */
  readonly remaining: number | undefined;
  readonly isValid: boolean;
  /** Seconds the fill took (server-side INSERT … SELECT, indexes, vacuum and analyze). */
  readonly fillSeconds: number;
}

export interface GrowthContender {
  readonly id: string;
  readonly kind: 'service' | 'peer';
  readonly label: string;
  readonly databases: readonly BenchDatabaseName[];
  /**
   * Peers at their defaults run only up to this backlog (100,000): above it the peers run at their
   * best settings alone, and tablequeue alone beyond a million rows.
   */
  readonly largestBacklog: number | undefined;
  /** tablequeue's contenders: the subscription they drain with (the groups part reuses it on its own table). */
  readonly libraryShape?: LibraryShape;
  run(run: GrowthDrainRun): Promise<GrowthDrainOutcome>;
}

const EVERY_DATABASE: readonly BenchDatabaseName[] = ['postgres', 'mariadb', 'sqlite'];
/** Above this backlog only the peers' best settings run. */
export const PEER_DEFAULTS_LARGEST_BACKLOG = 100_000;
/** Above this backlog only tablequeue runs. */
export const PEERS_LARGEST_BACKLOG = 1_000_000;

export interface LibraryShape {
  readonly id: string;
  readonly label: string;
  readonly options: ExtraSubscribeOptions;
  readonly batch?: number;
  /** Rows the probe's claim asks for: what the broker's claims ask for in this shape. */
  readonly claimLimit: number;
}

/**
 * The claim's time over a further drain of as many messages as were timed, or of what is left
 * of the backlog: over a second fill of the same rows when the timed drain took them all.
 * Undefined when the probe or that drain failed; the timed figures stand either way.
 */
async function probeOverFurtherDrain(
  run: GrowthDrainRun,
  table: QueueTable,
  blocks: readonly FillBlock[],
  handled: number,
  shape: LibraryShape,
  drain: (messages: number) => Promise<DrainMeasurement>,
): Promise<ClaimTiming | undefined> {
  let dueLeft = run.backlog - handled;
  if (dueLeft <= 0) {
    await dropGrowthTable(run.database, table);
    await fillGrowthTable(run.database, table, blocks, run.storage);
    dueLeft = run.backlog;
  }
  const probe = await ClaimProbe.start(run.database, table, '', shape.claimLimit).catch(() => undefined);
  if (probe === undefined) return undefined;
  try {
    await drain(Math.min(run.first, dueLeft));
  } catch {
    // The probe's timings are all this drain is for.
  }
  return probe.stop().catch(() => undefined);
}

/**
 * tablequeue at its defaults (the lease form, settlements coalesced) and at its best settings for
 * a drain: a buffer of 500 rows claimed ahead, and a batch handler of 100. Then the peers: each at
 * its defaults up to 100,000 rows and at its best settings up to a million.
 */
export function growthContenders(): GrowthContender[] {
  const shapes: LibraryShape[] = [
    { id: 'service.lease', label: 'tablequeue lease (defaults)', options: {}, claimLimit: 1 },
    { id: 'service.leasePrefetch', label: `tablequeue lease, prefetch ${SUITE_PREFETCH}`, options: { prefetch: SUITE_PREFETCH }, claimLimit: SUITE_PREFETCH },
    { id: 'service.leaseBatch', label: `tablequeue lease, batch ${SUITE_BATCH}`, options: {}, batch: SUITE_BATCH, claimLimit: SUITE_BATCH },
  ];
  const peers = [...graphileWorkerContenders(), pgBossContender(), ...plainjobContenders().filter((peer) => peer.id === 'peer.plainjob')];
  const peerDefaults = new Set(['peer.graphileWorker']);
  return [
    ...shapes.map((shape) => libraryContender(shape)),
    ...peers.map(
      (peer): GrowthContender => ({
        id: peer.id,
        kind: 'peer',
        label: peer.label,
        databases: peer.databases,
        largestBacklog: peerDefaults.has(peer.id) ? PEER_DEFAULTS_LARGEST_BACKLOG : PEERS_LARGEST_BACKLOG,
        run: async (run) => {
          const fillStartedAt = performance.now();
          const outcome = await peer.run({ database: run.database, workers: run.workers, messages: run.first, backlog: run.backlog, delayed: run.delayed, signal: run.signal });
          const { measurement } = outcome;
          // Peers record completions after the handler returns, and a partial drain does not wait
          // for the last ones, so their rows left are not checked; exactly `first` handler calls are.
          const isValid = !measurement.isCut && measurement.handled >= run.first && measurement.errors === 0;
          return { measurement, claim: undefined, remaining: undefined, isValid, fillSeconds: (performance.now() - fillStartedAt) / 1000 - measurement.seconds };
        },
      }),
    ),
  ];
}

function libraryContender(shape: LibraryShape): GrowthContender {
  return {
    id: shape.id,
    kind: 'service',
    label: shape.label,
    databases: EVERY_DATABASE,
    largestBacklog: undefined,
    libraryShape: shape,
    run: async (run) => {
      const table = growthTable('single');
      const blocks: FillBlock[] = [{ rows: run.backlog, timing: 'due' }];
      if (run.delayed > 0) blocks.push({ rows: run.delayed, timing: 'delayed' });
      const fillStartedAt = performance.now();
      await fillGrowthTable(run.database, table, blocks, run.storage);
      const fillSeconds = (performance.now() - fillStartedAt) / 1000;
      const drain = (messages: number): Promise<DrainMeasurement> =>
        drainWithService(
          { database: run.database, table, workers: run.workers, messages, signal: run.signal, ...(shape.batch === undefined ? {} : { batch: shape.batch }) },
          shape.options,
        );
      // The timed messages run without the probe: its claims lock the rows at the head of the
      // queue, which the drain's claims then skip, and roll back, and the claim after a rolled-back
      // claim of 500 rows took 12 to 14 ms against 3 to 4 after a committed one. The peers' drains
      // are not probed either.
      const measurement = await drain(run.first);
      const remaining = await countRows(run.database, table);
      const isValid = !measurement.isCut && measurement.handled >= run.first && remaining === run.backlog + run.delayed - measurement.handled;
      const claim = isValid && !run.signal.aborted ? await probeOverFurtherDrain(run, table, blocks, measurement.handled, shape, drain) : undefined;
      return { measurement, claim, remaining, isValid, fillSeconds };
    },
  };
}
