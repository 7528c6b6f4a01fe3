import type { Queue } from '../definition/define-table.js';
import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { Dialect } from '../dialect/dialect.js';
import { checkMysqlServerVersion } from '../dialect/mysql/mysql-dialect.js';
import {
  createScheduleStatements,
  parseSchedulesTable,
  SCHEDULE_COLUMNS,
  type SchedulesDatabase,
  type ScheduleStatements,
  type SchedulesTable,
} from '../dialect/schedule-statements.js';
import { withTransaction } from '../driver/connection-scope.js';
import type { Connection, Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { backoffDelayMs, type Backoff } from '../internal/backoff.js';
import type { Clock } from '../internal/clock.js';
import { TestSignal } from '../internal/test-signal.js';
import { MAX_TIMER_MS } from '../option-checks.js';
import type { PublishItem } from '../publish/publish-options.js';
import { bindStatement, type ParamValues } from '../statement.js';
import { SCHEDULED_AT_HEADER, type ScheduleDeclaration } from './schedule-options.js';
import { nextTickAfter, planTicks, type TickPlan } from './tick-plan.js';

/** What the broker lends its scheduler at start. */
export interface SchedulerRuntime {
  readonly driver: Driver;
  readonly dialect: Dialect;
  /** `name` or `schema.name` of the schedules table. */
  readonly table: string;
  /** Writes the tick's messages on the firing's transaction, through the broker's publish path. */
  readonly publishManyWithin: (queue: Queue<unknown>, items: readonly PublishItem<unknown>[], transaction: DeliveryTransaction) => Promise<number>;
  readonly onError: (error: unknown, detail: Record<string, unknown>) => void;
  readonly onWarning: (message: string) => void;
  /** Counts for metrics: ticks fired with a message, and ticks counted missed, per schedule. */
  readonly onCounted: (schedule: string, counts: { fired: number; missed: number }) => void;
}

/** One schedule as `broker.stats()` lists it. */
export interface ScheduleStats {
  readonly name: string;
  /** `schema.table/group` of the queue its messages go to. */
  readonly queue: string;
  readonly cron: string;
  readonly timezone: string;
  /** Ticks this broker fired (each with its messages), since start. */
  readonly fired: number;
  /** Ticks this broker counted missed, since start. */
  readonly missed: number;
  /** Attempts another replica won: it fired the tick first. */
  readonly firedElsewhere: number;
  /** The last tick the schedules table held when this broker last read it, ISO; null before. */
  readonly lastTickAt: string | null;
  /** When this broker next looks at the schedule, ISO; null when its cron has no next tick. */
  readonly nextTickAt: string | null;
}

/**
 * The host's clock with timers that keep the process alive: a broker that only fires schedules
 * runs until it is stopped, as one that claims does.
 */
const HOST_CLOCK: Clock = {
  now: () => new Date(),
  setTimer(ms, callback) {
    const timer = setTimeout(callback, ms);
    return () => clearTimeout(timer);
  },
};

/** After a failed firing (the database down), the schedule is tried again after this backoff. */
const FAILURE_BACKOFF: Backoff = { initialMs: 1_000, maxMs: 60_000 };

/**
 * Attempts lost in a row before a firing gives up until its next wake: each loss means another
 * replica advanced the schedule, so a few reads find a tick already fired and nothing due.
 */
const MAX_ATTEMPTS_PER_WAKE = 5;

/** What one attempt came to. */
type Attempt = 'advanced' | 'firedElsewhere' | 'notBegun';

interface ScheduleState {
  readonly declaration: ScheduleDeclaration;
  /** The definition the guard compares, bound as the row's columns. */
  readonly definition: ParamValues;
  lastTick: Date | null;
  nextWakeMs: number;
  failures: number;
  fired: number;
  missed: number;
  firedElsewhere: number;
  /** Whether the row's other definition was reported already, so it is reported once per change. */
  isOtherDefinitionReported: boolean;
}

/** What a test reaches in a scheduler (not exported by the package). */
export interface SchedulerTestHooks {
  /** The clock ticks are computed and timers set on; set before start. */
  clock: Clock;
  /** A firing committed: the schedule and its plan. */
  readonly committed: TestSignal<{ schedule: string; plan: TickPlan }>;
  /** The loop went to sleep until its next wake, in milliseconds on its clock (Infinity: none). */
  readonly sleeping: TestSignal<number>;
}

/**
 * Fires a broker's schedules: one timer to the earliest next tick over them, then each due
 * schedule in its own transaction on one connection:
 *
 * 1. read the schedule's row (the last tick fired, and the definition last declared);
 * 2. BEGIN (SQLite: IMMEDIATE), then advance `last_tick_at` from the value read to the plan's
 *    tick, guarded by that value and this replica's definition (`schedule.advance`);
 * 3. one row changed: write the tick's messages through the same connection, then COMMIT;
 *    no row changed (another replica fired it first): ROLLBACK, and go back to 1.
 *
 * Of replicas racing for a tick, the database lets one update find the value they all read:
 * Postgres and InnoDB make the second updater wait on the first's row lock, then re-check its
 * WHERE against the committed row, which no longer matches; SQLite's IMMEDIATE transactions run
 * one at a time. A replica killed at any point either committed (the tick advanced and its
 * messages written) or did not (neither: the server rolls back the transaction of a lost
 * session), and the next replica to read the row finds the tick still due.
 */
export class Scheduler {
  readonly testHooks: SchedulerTestHooks = {
    clock: HOST_CLOCK,
    committed: new TestSignal(),
    sleeping: new TestSignal(),
  };
  readonly #states: ScheduleState[];
  readonly #stopping = new AbortController();
  #runtime: SchedulerRuntime | undefined;
  #statements: ScheduleStatements | undefined;
  #table: SchedulesTable | undefined;
  #loop: Promise<void> | undefined;
  #wakeLoop: (() => void) | undefined;

  constructor(declarations: readonly ScheduleDeclaration[]) {
    this.#states = declarations.map((declaration) => ({
      declaration,
      definition: {
        'column:name': declaration.name,
        'column:queue_table': declaration.queue.table.spec.qualifiedName,
        'column:queue_name': declaration.queue.group ?? '',
        'column:cron': declaration.cron.expression,
        'column:time_zone': declaration.cron.timeZone,
      },
      lastTick: null,
      nextWakeMs: 0,
      failures: 0,
      fired: 0,
      missed: 0,
      firedElsewhere: 0,
      isOtherDefinitionReported: false,
    }));
  }

  /** The schedules as declared, in declaration order: what the broker's AsyncAPI document lists. */
  get declarations(): readonly ScheduleDeclaration[] {
    return this.#states.map((state) => state.declaration);
  }

  /**
   * Creates the table if missing and registers every schedule: a new one starts at its latest
   * tick at or before now (it never fires its past), an existing one takes this declaration.
   * A failure fails the broker's start.
   */
  async open(runtime: SchedulerRuntime): Promise<void> {
    this.#runtime = runtime;
    const database = await schedulesDatabaseOf(runtime.driver, runtime.dialect);
    this.#statements = createScheduleStatements(database);
    this.#table = parseSchedulesTable(runtime.table, database);
    await createSideTable(runtime.driver, 'schedule.createTable', this.#statements.createTable(this.#table));
    const now = this.testHooks.clock.now();
    for (const state of this.#states) {
      await this.#register(state, now);
      runtime.onCounted(state.declaration.name, { fired: 0, missed: 0 });
    }
  }

  start(): void {
    this.#loop = this.#run();
  }

  /** Stops the timer and the jitter waits, and waits for a firing in progress to end. */
  async stop(): Promise<void> {
    this.#stopping.abort();
    this.#wakeLoop?.();
    await this.#loop;
  }

  stats(): ScheduleStats[] {
    return this.#states.map((state) => {
      const { declaration } = state;
      return {
        name: declaration.name,
        queue: declaration.queue.label,
        cron: declaration.cron.expression,
        timezone: declaration.cron.timeZone,
        fired: state.fired,
        missed: state.missed,
        firedElsewhere: state.firedElsewhere,
        lastTickAt: state.lastTick?.toISOString() ?? null,
        nextTickAt: Number.isFinite(state.nextWakeMs) ? new Date(state.nextWakeMs).toISOString() : null,
      };
    });
  }

  async #register(state: ScheduleState, now: Date): Promise<void> {
    const latest = state.declaration.cron.latestAtOrBefore(now);
    await this.#runtime!.driver.execute(
      bindStatement(this.#statements!.register(this.#table!), { ...state.definition, 'column:last_tick_at': latest }),
    );
  }

  async #run(): Promise<void> {
    const signal = this.#stopping.signal;
    while (!signal.aborted) {
      const nowMs = this.testHooks.clock.now().getTime();
      const due = this.#states.filter((state) => state.nextWakeMs <= nowMs);
      await Promise.all(due.map((state) => this.#wakeOne(state)));
      if (signal.aborted) return;
      await this.#sleepUntil(Math.min(...this.#states.map((state) => state.nextWakeMs)));
    }
  }

  /** Waits on the clock until `wakeMs` (Infinity: until stop), in steps no longer than Node's longest timer. */
  #sleepUntil(wakeMs: number): Promise<void> {
    const clock = this.testHooks.clock;
    const delayMs = Math.max(0, wakeMs - clock.now().getTime());
    this.testHooks.sleeping.emit(delayMs);
    if (delayMs === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const cancel = Number.isFinite(delayMs) ? clock.setTimer(Math.min(delayMs, MAX_TIMER_MS), () => this.#wakeLoop?.()) : () => undefined;
      this.#wakeLoop = () => {
        this.#wakeLoop = undefined;
        cancel();
        resolve();
      };
    });
  }

  /** The jitter wait, then the firing; a failure is reported and the schedule tried again after a backoff. */
  async #wakeOne(state: ScheduleState): Promise<void> {
    const { jitterMs, name } = state.declaration;
    if (jitterMs > 0) await this.#sleepOnClock(Math.random() * jitterMs);
    if (this.#stopping.signal.aborted) return;
    try {
      await this.#fire(state);
      state.failures = 0;
    } catch (error) {
      state.failures += 1;
      const retryInMs = backoffDelayMs(FAILURE_BACKOFF, state.failures);
      state.nextWakeMs = this.testHooks.clock.now().getTime() + retryInMs;
      this.#runtime!.onError(error, { schedule: name, phase: 'schedule', retryInMs });
    }
  }

  #sleepOnClock(ms: number): Promise<void> {
    const signal = this.#stopping.signal;
    return new Promise((resolve) => {
      const done = () => {
        cancel();
        signal.removeEventListener('abort', done);
        resolve();
      };
      const cancel = this.testHooks.clock.setTimer(ms, done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Reads, plans and commits until this replica fired what is due, found nothing due, or lost too many races. */
  async #fire(state: ScheduleState): Promise<void> {
    const { declaration } = state;
    const clock = this.testHooks.clock;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS_PER_WAKE; attempt += 1) {
      const row = await this.#read(state);
      const now = clock.now();
      if (row === undefined || !this.#isOwnDefinition(state, row)) {
        // Declared differently by another replica since (or deleted): the row is declared again at
        // this broker's next start; until then this replica looks again at each of its own ticks.
        if (row === undefined) await this.#register(state, now);
        state.nextWakeMs = declaration.cron.nextAfter(now)?.getTime() ?? Infinity;
        return;
      }
      state.lastTick = toDate(row[SCHEDULE_COLUMNS.lastTickAt]);
      const plan = planTicks(declaration.cron, state.lastTick, now, declaration);
      if (plan === undefined) {
        state.nextWakeMs = nextTickAfter(declaration.cron, state.lastTick, now)?.getTime() ?? Infinity;
        return;
      }
      const attempted = await this.#commit(state, plan);
      if (attempted === 'firedElsewhere') {
        state.firedElsewhere += 1;
        continue;
      }
      if (attempted === 'notBegun') {
        state.nextWakeMs = now.getTime() + FAILURE_BACKOFF.initialMs;
        return;
      }
      state.lastTick = plan.advanceTo;
      state.fired += plan.fire.length;
      state.missed += plan.missed;
      this.#runtime!.onCounted(declaration.name, { fired: plan.fire.length, missed: plan.missed });
      this.testHooks.committed.emit({ schedule: declaration.name, plan });
      state.nextWakeMs = nextTickAfter(declaration.cron, plan.advanceTo, clock.now())?.getTime() ?? Infinity;
      return;
    }
    state.nextWakeMs = clock.now().getTime() + FAILURE_BACKOFF.initialMs;
  }

  async #read(state: ScheduleState): Promise<Record<string, unknown> | undefined> {
    const read = bindStatement(this.#statements!.read(this.#table!), { 'column:name': state.declaration.name });
    return (await this.#runtime!.driver.execute(read)).rows[0];
  }

  /** Whether the row holds this replica's definition; a different one is reported once. */
  #isOwnDefinition(state: ScheduleState, row: Record<string, unknown>): boolean {
    const c = SCHEDULE_COLUMNS;
    const differing = [c.queueTable, c.queueName, c.cron, c.timeZone].filter(
      (column) => String(row[column]) !== state.definition[`column:${column}`],
    );
    if (differing.length === 0) {
      state.isOtherDefinitionReported = false;
      return true;
    }
    if (!state.isOtherDefinitionReported) {
      state.isOtherDefinitionReported = true;
      const found = differing.map((column) => `${column} ${JSON.stringify(row[column])}`).join(', ');
      this.#runtime!.onWarning(
        `schedule "${state.declaration.name}": the schedules table holds ${found}, declared by another broker since this one started; this broker fires none of its ticks until the definitions agree again (the broker started last decides)`,
      );
    }
    return false;
  }

  /**
   * The guard and the messages in one transaction (see the class comment). Where the pool is the
   * service's own SQLite handle, a BEGIN refused because the service's transaction holds it is
   * tried again after a short wait, not reported.
   */
  async #commit(state: ScheduleState, plan: TickPlan): Promise<Attempt> {
    const { driver, dialect, publishManyWithin } = this.#runtime!;
    const { declaration } = state;
    const session = {
      begin: dialect.session.begin({ sqliteBegin: 'immediate' }),
      commit: dialect.session.commit(),
      rollback: dialect.session.rollback(),
    };
    const advance = bindStatement(this.#statements!.advance(this.#table!), {
      ...state.definition,
      'column:last_tick_at': plan.advanceTo,
      'column:seen_last_tick_at': state.lastTick,
      'column:fired_count': plan.fire.length,
      'column:missed_count': plan.missed,
    });
    const outcome = await withTransaction<Attempt | DeliveryTransaction>(
      driver,
      session,
      async ({ rollBack }, connection: Connection) => {
        if ((await connection.execute(advance)).affectedRows !== 1) {
          await rollBack();
          return 'firedElsewhere';
        }
        if (plan.fire.length === 0) return 'advanced';
        const transaction = new DeliveryTransaction(connection, `schedule ${declaration.name}`);
        try {
          await publishManyWithin(declaration.queue, plan.fire.map((tick) => itemOf(declaration, tick)), transaction);
        } catch (error) {
          transaction.rolledBack();
          throw error;
        }
        transaction.endLoan();
        return transaction;
      },
      dialect.capabilities.sharesSessionWithService ? { whenBeginRefused: () => 'notBegun' } : undefined,
    );
    if (!(outcome instanceof DeliveryTransaction)) return outcome;
    // Wakes this broker's subscriptions of the queue, now that a claim can see the rows.
    outcome.committed();
    return 'advanced';
  }
}

function itemOf(declaration: ScheduleDeclaration, tick: Date): PublishItem<unknown> {
  return { payload: declaration.payload, headers: { ...declaration.headers, [SCHEDULED_AT_HEADER]: tick.toISOString() } };
}

/** pg and mysql2 return a Date; SQLite the fixed-width text the driver wrote. */
function toDate(value: unknown): Date | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value : new Date(String(value));
}

/**
 * The flavour decides the collation of the table's text columns; the dialect is one for MySQL
 * and MariaDB, so the server's version says which.
 */
async function schedulesDatabaseOf(driver: Driver, dialect: Dialect): Promise<SchedulesDatabase> {
  if (dialect.name !== 'mysql') return dialect.name;
  const result = await driver.execute(bindStatement(dialect.session.serverVersion(), {}));
  return checkMysqlServerVersion(String(result.rows[0]?.['version'] ?? '')).flavor;
}
