import { randomUUID } from 'node:crypto';
import type { Dialect } from '../dialect/dialect.js';
import {
  createRetentionStatements,
  parseMaintenanceTable,
  type MaintenanceTable,
  type PrunedKind,
  type RetentionStatements,
} from '../dialect/retention-statements.js';
import type { Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { abortableSleep } from '../internal/abortable-sleep.js';
import { TestSignal } from '../internal/test-signal.js';
import { bindStatement } from '../statement.js';
import { DedupeWindowPruner } from './dedupe-window-pruner.js';
import { Pruner } from './pruner.js';
import type { RetentionDeclaration } from './retention-options.js';

/**
 * How long a replica holds a table's maintenance lease without renewing it: the longest another
 * replica waits to take over after the holder died mid-run. The holder renews it once a third has
 * passed, between batches, so only a batch stuck for twenty seconds could outlive it.
 */
export const MAINTENANCE_LEASE_MS = 30_000;

export type PrunedCounts = Readonly<Record<PrunedKind, number>>;

/** One table's retention on this broker, in `broker.stats().retention`. */
export interface RetentionStats {
  /** The table's qualified name. */
  readonly table: string;
  /** Runs in which this broker held the table's maintenance lease and pruned. */
  readonly runs: number;
  /** Runs that found another replica holding the lease, and deleted nothing. */
  readonly runsSkipped: number;
  /** When the last run that held the lease ended; undefined before one. */
  readonly lastRunAt: Date | undefined;
  /** Rows the last run that held the lease deleted. */
  readonly lastRunDeleted: PrunedCounts;
  /** Rows this broker deleted since it started. */
  readonly deleted: PrunedCounts;
  /** A run is deleting now. */
  readonly isPruning: boolean;
}

/**
 * One run as a test sees it: whether it held the lease, when it began and ended, what it deleted.
 * A run that held the lease began once it had taken it and ended before it let it go, so two
 * holders' runs never overlap however close they follow each other.
 */
export interface RetentionRunReport {
  readonly table: string;
  readonly held: boolean;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly deleted: PrunedCounts;
}

export interface RetainerTestHooks {
  /** A run ended, with the lease or without it. */
  readonly runEnded: TestSignal<RetentionRunReport>;
  /** A batch deleted rows (its table, kind and count). */
  readonly batchDeleted: TestSignal<{ table: string; kind: PrunedKind; rowCount: number }>;
}

export interface RetainerRuntime {
  readonly driver: Driver;
  readonly dialect: Dialect;
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
  /** Rows a batch deleted, for `tablequeue_pruned_rows_total`. */
  readonly onPruned: (table: string, kind: PrunedKind, rowCount: number) => void;
  /** The broker's `dedupeWindowsTable`, whose passed windows a `dedupeWindows` declaration deletes. */
  readonly dedupeWindowsTable: string;
}

const NO_ROWS: PrunedCounts = Object.freeze({ processed: 0, deadLetter: 0, dedupeWindow: 0 });

/**
 * The broker's retention: for each `retain(table)`, a run at start and every interval. A run
 * takes the table's row in the maintenance table (a lease on the database clock, taken only when
 * expired or already this broker's), deletes each kind in batches while renewing it, and releases
 * it; a replica that finds it held skips the run. So one replica at a time prunes a table, with
 * no leader to elect, and a replica that dies mid-run holds it at most MAINTENANCE_LEASE_MS.
 */
export class Retainer {
  readonly testHooks: RetainerTestHooks = { runEnded: new TestSignal(), batchDeleted: new TestSignal() };
  readonly #declarations: readonly RetentionDeclaration[];
  /** This broker's name in the maintenance table's holder column. */
  readonly #holder = randomUUID();
  readonly #stopping = new AbortController();
  readonly #stats = new Map<string, { runs: number; runsSkipped: number; lastRunAt: Date | undefined; lastRunDeleted: PrunedCounts; deleted: Record<PrunedKind, number>; isPruning: boolean }>();
  #runtime: (RetainerRuntime & { statements: RetentionStatements }) | undefined;
  #loops: Promise<void>[] = [];
  /** Each `dedupeWindows` declaration's pruner, made at open with its table. */
  readonly #windowPruners = new Map<RetentionDeclaration, DedupeWindowPruner>();

  constructor(declarations: readonly RetentionDeclaration[]) {
    this.#declarations = declarations;
    for (const declaration of declarations) {
      this.#stats.set(declaration.table.spec.qualifiedName, {
        runs: 0,
        runsSkipped: 0,
        lastRunAt: undefined,
        lastRunDeleted: NO_ROWS,
        deleted: { ...NO_ROWS },
        isPruning: false,
      });
    }
  }

  /** Creates each maintenance table if missing and adds each table's task; a failure fails the broker's start. */
  async open(runtime: RetainerRuntime): Promise<void> {
    const statements = createRetentionStatements(runtime.dialect.name);
    this.#runtime = { ...runtime, statements };
    for (const declaration of this.#declarations) {
      const table = parseMaintenanceTable(declaration.maintenanceTable, runtime.dialect.name);
      await createSideTable(runtime.driver, 'retention.createMaintenanceTable', statements.createMaintenanceTable(table));
      await runtime.driver.execute(bindStatement(statements.addTask(table), { 'column:task': taskOf(declaration) }));
      if (declaration.dedupeWindows) {
        const pruner = new DedupeWindowPruner({
          driver: runtime.driver,
          dialect: runtime.dialect,
          windowsTable: runtime.dedupeWindowsTable,
          queueTable: declaration.table.spec.qualifiedName,
        });
        await pruner.createTable();
        this.#windowPruners.set(declaration, pruner);
      }
    }
  }

  start(): void {
    this.#loops = this.#declarations.map((declaration) => this.#loop(declaration));
  }

  /** Ends the runs between two batches and releases the leases they hold. */
  async stop(): Promise<void> {
    this.#stopping.abort();
    await Promise.all(this.#loops);
  }

  stats(): RetentionStats[] {
    return [...this.#stats].map(([table, stats]) => ({ table, ...stats, deleted: { ...stats.deleted } }));
  }

  async #loop(declaration: RetentionDeclaration): Promise<void> {
    const signal = this.#stopping.signal;
    while (!signal.aborted) {
      await this.#run(declaration).catch((error: unknown) =>
        this.#runtime!.onError(error, { phase: 'retention', table: declaration.table.spec.qualifiedName }),
      );
      await abortableSleep(declaration.intervalMs, signal);
    }
  }

  async #run(declaration: RetentionDeclaration): Promise<void> {
    const runtime = this.#runtime!;
    const spec = declaration.table.spec;
    const stats = this.#stats.get(spec.qualifiedName)!;
    const maintenance = parseMaintenanceTable(declaration.maintenanceTable, runtime.dialect.name);
    const triedAt = Date.now();
    const deleted: Record<PrunedKind, number> = { ...NO_ROWS };
    if (!(await this.#takeLease(declaration, maintenance))) {
      stats.runsSkipped += 1;
      this.testHooks.runEnded.emit({ table: spec.qualifiedName, held: false, startedAt: triedAt, endedAt: Date.now(), deleted });
      return;
    }
    const startedAt = Date.now();
    let renewedAt = startedAt;
    let isHeld = true;
    const beforeBatch = async (): Promise<boolean> => {
      if (Date.now() - renewedAt < MAINTENANCE_LEASE_MS / 3) return true;
      isHeld = await this.#takeLease(declaration, maintenance);
      renewedAt = Date.now();
      return isHeld;
    };
    stats.isPruning = true;
    const counted = (kind: PrunedKind) => (rowCount: number) => {
      deleted[kind] += rowCount;
      stats.deleted[kind] += rowCount;
      runtime.onPruned(spec.qualifiedName, kind, rowCount);
      this.testHooks.batchDeleted.emit({ table: spec.qualifiedName, kind, rowCount });
    };
    const batches = { batchSize: declaration.batchSize, pauseMs: declaration.pauseMs, signal: this.#stopping.signal, beforeBatch };
    try {
      const pruner = new Pruner({ driver: runtime.driver, dialect: runtime.dialect, spec });
      for (const { target, olderThanMs } of declaration.targets) {
        if (!isHeld || this.#stopping.signal.aborted) break;
        await pruner.prune({ ...batches, target, olderThanMs, onDeleted: counted(target.kind) });
        // The next kind starts with a fresh check, so a run of both kinds renews between them too.
        if (!(await beforeBatch())) break;
      }
      if (declaration.dedupeWindows && isHeld && !this.#stopping.signal.aborted) {
        await this.#windowPruners.get(declaration)!.prune({ ...batches, onDeleted: counted('dedupeWindow') });
      }
    } finally {
      stats.isPruning = false;
      stats.runs += 1;
      stats.lastRunAt = new Date();
      stats.lastRunDeleted = Object.freeze({ ...deleted });
      const endedAt = Date.now();
      if (isHeld) await this.#releaseLease(declaration, maintenance);
      this.testHooks.runEnded.emit({ table: spec.qualifiedName, held: true, startedAt, endedAt, deleted });
    }
  }

  async #takeLease(declaration: RetentionDeclaration, maintenance: MaintenanceTable): Promise<boolean> {
    const runtime = this.#runtime!;
    const result = await runtime.driver.execute(
      bindStatement(runtime.statements.takeLease(maintenance), {
        'column:task': taskOf(declaration),
        'column:holder': this.#holder,
        delayMicroseconds: MAINTENANCE_LEASE_MS * 1000,
      }),
    );
    return result.affectedRows === 1;
  }

  /** Lets another replica run at once instead of after the lease; a failure only makes it wait. */
  async #releaseLease(declaration: RetentionDeclaration, maintenance: MaintenanceTable): Promise<void> {
    const runtime = this.#runtime!;
    await runtime.driver
      .execute(
        bindStatement(runtime.statements.releaseLease(maintenance), { 'column:task': taskOf(declaration), 'column:holder': this.#holder }),
      )
      .catch((error: unknown) => runtime.onError(error, { phase: 'retention', statement: 'retention.releaseLease' }));
  }
}

/** The maintenance row of a table's retention: one per table, whichever replicas declare it. */
function taskOf(declaration: RetentionDeclaration): string {
  return `retain:${declaration.table.spec.qualifiedName}`;
}
