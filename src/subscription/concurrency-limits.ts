import type { ConcurrencyLimits } from '../claim/form-context.js';
import { createConcurrencyStatements, type ConcurrencyStatements } from '../dialect/concurrency-statements.js';
import type { Dialect } from '../dialect/dialect.js';
import type { Driver } from '../driver/driver.js';
import { createSideTable } from '../driver/side-table-creation.js';
import { DeclarationError, UnsupportedError } from '../errors.js';
import { bindStatement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

/** The subscribe option `concurrency`. */
export interface ConcurrencyOption {
  /** Rows of the queue in work at once across every broker and process. */
  readonly global?: number;
  /** Rows of one partition key in work at once across every broker and process (1: one at a time per key). */
  readonly perKey?: number;
}

/**
 * A limit above this is no limit a person means: it is a hundred subscriptions of the most
 * workers each, and a count that never reaches it still costs its statement on every claim.
 */
export const MAX_CONCURRENCY_LIMIT = 100_000;

const KEYS = new Set(['global', 'perKey']);

export function resolveConcurrency(value: ConcurrencyOption | undefined, where: string): ConcurrencyLimits | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new DeclarationError(`${where}: concurrency must be an object such as { global: 5 } or { perKey: 1 }`);
  }
  for (const key of Object.keys(value)) {
    if (!KEYS.has(key)) throw new DeclarationError(`${where}: unknown concurrency option "${key}"; the options are global and perKey`);
  }
  const limit = (name: 'global' | 'perKey') => {
    const n = value[name];
    if (n === undefined) return undefined;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_CONCURRENCY_LIMIT) {
      throw new DeclarationError(
        `${where}: concurrency.${name} must be a whole number of rows from 1 to ${MAX_CONCURRENCY_LIMIT}, got ${String(n)}`,
      );
    }
    return n;
  };
  const limits = { global: limit('global'), perKey: limit('perKey') };
  if (limits.global === undefined && limits.perKey === undefined) {
    throw new DeclarationError(`${where}: concurrency needs global, perKey or both (for example { global: 5 })`);
  }
  return Object.freeze(limits);
}

/**
 * The row lock form's slots: each one in use is a transaction held open through a handler, so
 * a connection; a thousand is already more than a server serves by default. MySQL's recursive
 * CTE that adds them stops at 1,000 rows by default (`cte_max_recursion_depth`).
 */
export const MAX_ROW_LOCK_SLOTS = 1_000;

/**
 * The advisory form's slots are locks a claim tries one by one until one is free: with every slot
 * held, a claim tries them all, one round trip each, before it finds the limit reached.
 */
export const MAX_ADVISORY_SLOTS = 100;

/**
 * At open, against the table: the lease form counts live leases under a guard; the row lock form
 * locks slot rows (per queue, and per key); the advisory form slot keys (global only: a key has no
 * row to lock, and in the advisory form a key template naming the partition key already runs one
 * row per key at a time). A FIFO group already runs one row at a time; perKey counts by the
 * partition key column.
 */
export function checkConcurrencyFits(limits: ConcurrencyLimits, spec: TableSpec, dialect: Dialect, subscription: string): void {
  const where = `subscription "${subscription}"`;
  const database = dialect.name;
  if (spec.group?.fifo === true) {
    throw new DeclarationError(
      `${where}: table "${spec.qualifiedName}" has FIFO groups, which already run one row of a group at a time; remove concurrency`,
    );
  }
  if (limits.perKey !== undefined && spec.partitionKey === undefined) {
    throw new DeclarationError(
      `${where}: concurrency.perKey counts rows in work by partition key; declare partitionKey in defineTable or remove perKey`,
    );
  }
  if (spec.form === 'lease') return;
  if (limits.perKey !== undefined && spec.form === 'advisory') {
    throw new UnsupportedError({
      database,
      feature: 'concurrency.perKey in the advisory lock form',
      message: `${where}: concurrency.perKey needs rows in work counted by key, which the advisory lock form has nowhere to keep; table "${spec.qualifiedName}" uses the advisory lock form: for one row per key at a time, name the partition key in the advisoryLock template (such as "customer-{customer}") instead`,
    });
  }
  if (limits.perKey !== undefined && database === 'mysql' && spec.isolation !== 'read committed') {
    throw new UnsupportedError({
      database,
      feature: 'concurrency.perKey in the row lock form at repeatable read',
      message: `${where}: concurrency.perKey in the row lock form locks a slot row of the key for each row in work; at ${spec.isolation ?? 'the server default (repeatable read)'} InnoDB also locks the gaps beside the slots a delivery holds, so adding a new key's slots would wait until that delivery ends. Declare isolation: 'read committed' on table "${spec.qualifiedName}", or declare a lockedUntil column (lease form)`,
    });
  }
  const most = spec.form === 'rowLock' ? MAX_ROW_LOCK_SLOTS : MAX_ADVISORY_SLOTS;
  if (limits.perKey !== undefined && limits.perKey > MAX_ROW_LOCK_SLOTS) {
    throw new DeclarationError(`${where}: concurrency.perKey in the row lock form holds a transaction, so a connection, per row in work; give at most ${MAX_ROW_LOCK_SLOTS}`);
  }
  if (limits.global !== undefined && limits.global > most) {
    const why =
      spec.form === 'rowLock'
        ? 'holds a transaction, so a connection, per row in work'
        : 'tries its slot keys one by one, so a claim that finds the limit reached costs one round trip per slot';
    throw new DeclarationError(`${where}: concurrency.global in the ${spec.form === 'rowLock' ? 'row lock' : 'advisory lock'} form ${why}; give at most ${most}`);
  }
}

/**
 * Row lock form: creates the slots table and the queue's missing slots up to `global` (slots
 * above it, left by a larger limit, are never taken). Only slots above the highest are added, so
 * a broker starting while others' deliveries hold slots never waits on them. Lease form: creates the guard rows' table where the
 * database needs one (MySQL, MariaDB), and the queue's row in it. A broker creating a table at the same moment counts as having created it
 * (createSideTable). The row is written here, on its own (and tried once more after a failure), because
 * two claims inserting the same missing row at once can deadlock in InnoDB; afterwards every
 * claim's upsert finds it.
 */
export async function ensureConcurrencyGuards(
  driver: Driver,
  dialect: Dialect,
  spec: TableSpec,
  limits: ConcurrencyLimits,
  group: string | undefined,
): Promise<void> {
  // The advisory form's slots are locks, not rows: nothing to create.
  if (spec.form === 'advisory') return;
  const statements = createConcurrencyStatements(dialect.name);
  if (spec.form === 'rowLock') {
    const { slots, keySlots } = statements;
    if (keySlots !== undefined && limits.perKey !== undefined) {
      await createSideTable(driver, 'concurrency.createKeySlotsTable', keySlots.createTable(spec));
      // Claims add a key's slots behind the guard row where the database needs one (MySQL, MariaDB).
      if (keySlots.addInTransaction) await ensureGuardRow(driver, statements, spec, group);
    }
    if (slots === undefined || limits.global === undefined) return;
    await createSideTable(driver, 'concurrency.createSlotsTable', slots.createTable(spec));
    const global = limits.global;
    await onceMoreAfterFailure(async () => {
      const highest = Number((await driver.execute(bindStatement(slots.highest(spec), { group }))).rows[0]?.['highest']);
      if (highest < global) await driver.execute(bindStatement(slots.add(spec), { group, firstSlot: highest + 1, global }));
    });
    return;
  }
  await ensureGuardRow(driver, statements, spec, group);
}

async function ensureGuardRow(driver: Driver, statements: ConcurrencyStatements, spec: TableSpec, group: string | undefined): Promise<void> {
  const sql = statements.createGuardTable(spec);
  const guard = statements.guard(spec);
  if (sql === undefined || guard === undefined) return;
  await createSideTable(driver, 'concurrency.createGuardTable', sql);
  await onceMoreAfterFailure(() => driver.execute(bindStatement(guard, { group })));
}

async function onceMoreAfterFailure(run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch {
    await run();
  }
}
