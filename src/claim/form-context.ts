import type { DeadLetterTarget, Dialect, TableColumns } from '../dialect/dialect.js';
import type { RateLimitsTable } from '../dialect/rate-limit-statements.js';
import type { Connection, Driver } from '../driver/driver.js';
import type { ParamValues, Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

/** What a claim form needs from its subscription. */
export interface FormContext {
  readonly driver: Driver;
  readonly dialect: Dialect;
  readonly spec: TableSpec;
  /** The table's columns as found when the subscription opened. */
  readonly columns: TableColumns;
  /** The group this subscription reads, or undefined on a table without groups. */
  readonly group: string | undefined;
  /** Where rows go when their attempts run out, when the subscription declares it. */
  readonly deadLetter: DeadLetterTarget | undefined;
  /** Names the subscription in errors. */
  readonly subscription: string;
  /**
   * Transactional mode: each claimed row comes with its delivery's transaction (`HeldRow.transaction`),
   * one row per claim, and every delivery holds a connection until it settles (WP-5).
   */
  readonly transactional: boolean;
  /** Deliveries of one partition key run one after another (`workersByKey`), so each must be settled before the next. */
  readonly keyed: boolean;
  /**
   * Whether the connections every subscription on the pool holds leave room for one more (WP-2,
   * WP-4): asked before a claim takes a further connection of its own (an advisory batch's rows).
   */
  readonly hasRoomForConnection: () => boolean;
  /** `concurrency`: limits every claim of the queue enforces (lease: behind its guard; row lock: by slot rows). */
  readonly concurrency: ConcurrencyLimits | undefined;
  /** `rate` (lease form): the slots every claim of the queue takes behind the rate guard. */
  readonly rate?: RateClaim | undefined;
}

/** What a lease claim under a rate limit runs (subscription/rate-limit.ts), after the concurrency guard and count. */
export interface RateClaim {
  /** The rate limits table when the claim statement reads each key's room (`rate.key`); undefined for a whole-queue rate. */
  readonly byKeyTable: RateLimitsTable | undefined;
  /** Takes the rate guard, where the claim's transaction is not already one (SQLite's is). */
  guard(connection: Connection): Promise<void>;
  /** How many rows the rate lets this claim take now (0 notes when the next slot frees). */
  free(connection: Connection, values: ParamValues): Promise<number>;
  /** What the claim statement binds for the rate (per key: its window and limit). */
  claimValues(values: ParamValues): ParamValues;
  /** Uses one slot per row taken (per key: records each key's rows). */
  use(connection: Connection, values: ParamValues, rows: readonly Record<string, unknown>[]): Promise<void>;
  /** After a claim that took nothing: notes when the rate could next let one through. */
  tookNothing(connection: Connection, values: ParamValues): Promise<void>;
  readonly statements: readonly Statement[];
}

/**
 * Rows of the queue in work at once across every broker and process: in all (`global`) and per
 * partition key (`perKey`). At least one is set.
 */
export interface ConcurrencyLimits {
  readonly global: number | undefined;
  readonly perKey: number | undefined;
}

/**
 * WP-7: claims of a subscription run one at a time where the database has one writer (claims
 * side by side only collide), and on FIFO-group tables and tables with a partition key column
 * (two claims side by side could finish out of claim order). The lease form adds its own case.
 */
export function claimsOneAtATime(context: FormContext): boolean {
  const { dialect, spec } = context;
  return dialect.capabilities.hasSingleWriter || spec.group?.fifo === true || spec.partitionKey !== undefined;
}
