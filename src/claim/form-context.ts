import type { DeadLetterTarget, Dialect, TableColumns } from '../dialect/dialect.js';
import type { Driver } from '../driver/driver.js';
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
  /**
   * Whether the connections every subscription on the pool holds leave room for one more (WP-2,
   * WP-4): asked before a claim takes a further connection of its own (an advisory batch's rows).
   */
  readonly hasRoomForConnection: () => boolean;
}
