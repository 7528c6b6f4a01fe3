/**
 * defineDialect: a service's own dialect as a built-in one with some statements replaced. Groups
 * merge one level deep, so an override of `lease.extend` keeps every other lease statement.
 */
import { DeclarationError } from '../errors.js';
import { ADVISORY_CONFIRMED_COLUMN, ADVISORY_KEY_COLUMN, type AdvisoryStatements } from './advisory-statements.js';
import { createDialect } from './create-dialect.js';
import { HELD_KEY_COLUMN, IN_WORK_COLUMN, type DedupeStatements } from './dedupe-statements.js';
import { COLUMN_COLUMN, INDEX_COLUMN } from './index-read.js';
import { DIALECT_GROUPS, DIALECT_MEMBERS, type DialectGroup } from './dialect-renderings.js';
import {
  GROUP_GUARD_COLUMN,
  type BuiltInDialectName,
  type Dialect,
  type DialectCapabilities,
  type FifoStatements,
  type InsertStatements,
  type LeaseStatements,
  type RowLockStatements,
  type SchemaStatements,
  type SessionStatements,
  type SettleStatements,
} from './dialect.js';
import type { NotifyStatements } from './notify.js';
import { protocolOf } from './service-dialect.js';

/**
 * The columns the library reads by name from what a dialect's statements return, beside the
 * table's own: a statement of the service's own must return them under these names.
 */
export const DIALECT_RESULT_COLUMNS = Object.freeze({
  /** `session.serverVersion`: the server's version text. */
  serverVersion: 'version',
  /** `fifo.guard` (and a lease claim's guard): 1 when the claim owns the group, 0 otherwise. */
  groupGuard: GROUP_GUARD_COLUMN,
  /** `advisory.candidates`, `advisory.keyOf`, `advisory.slotKeys`: the lock key as the database rendered it. */
  advisoryKey: ADVISORY_KEY_COLUMN,
  /** `advisory.lock` and `advisory.unlock`: 1 when confirmed, 0 otherwise. */
  advisoryConfirmed: ADVISORY_CONFIRMED_COLUMN,
  /** `dedupe.holder` on a lease table: 1 while a live lease holds the row that holds the key. */
  dedupeInWork: IN_WORK_COLUMN,
  /** `dedupe.heldKeys`: a key that a row holds. */
  dedupeHeldKey: HELD_KEY_COLUMN,
  /** `dedupe.uniqueIndexes`: an index's name, and one of its columns. */
  uniqueIndexName: INDEX_COLUMN,
  uniqueIndexColumn: COLUMN_COLUMN,
});

/** What a dialect replaces of the built-in it extends; every group is merged one level deep. */
export interface DialectOverrides {
  readonly capabilities?: Partial<DialectCapabilities>;
  readonly session?: Partial<SessionStatements>;
  readonly rowLock?: Partial<RowLockStatements>;
  readonly lease?: Partial<LeaseStatements>;
  readonly fifo?: Partial<FifoStatements>;
  readonly advisory?: Partial<AdvisoryStatements>;
  readonly settle?: Partial<SettleStatements>;
  readonly insert?: Partial<InsertStatements>;
  readonly dedupe?: Partial<DedupeStatements>;
  readonly schema?: Partial<SchemaStatements>;
  readonly notify?: Partial<NotifyStatements>;
  readonly validateTable?: Dialect['validateTable'];
  readonly checkServerVersion?: Dialect['checkServerVersion'];
}

export interface DialectDefinition {
  /** The built-in dialect to extend: the protocol, and every statement not overridden. */
  readonly basedOn: BuiltInDialectName;
  /** What errors call this dialect: `'postgres10'`, `'yugabyte'`. */
  readonly label: string;
  /**
   * The version of the Dialect interface the overrides were written against, as a number in your
   * code (`1`), not `DIALECT_INTERFACE_VERSION`, which would always match: a tablequeue whose
   * interface changed then refuses the dialect until its overrides are checked against the change.
   */
  readonly interfaceVersion: number;
  /** The statements to replace, or a function of the built-in that returns them (to wrap its statements). */
  readonly overrides?: DialectOverrides | ((base: Dialect) => DialectOverrides);
}

const OVERRIDE_KEYS: ReadonlySet<string> = new Set(['capabilities', ...DIALECT_GROUPS, 'validateTable', 'checkServerVersion']);

/** Values of groups that are not methods, and groups within groups. */
const GROUP_VALUES: Partial<Record<DialectGroup, readonly string[]>> = {
  dedupe: ['heldKeyOnInsert'],
  schema: ['textCollation', 'indexes'],
  notify: ['maxPayloadBytes'],
};

/**
 * A dialect that extends a built-in one: `basedOn` gives the protocol and every statement the
 * overrides leave alone. A name that is not a member of the Dialect fails here, not at start.
 */
export function defineDialect(definition: DialectDefinition): Dialect {
  if (definition === null || typeof definition !== 'object') {
    throw new DeclarationError("defineDialect needs { basedOn: 'postgres', label: 'my-dialect', interfaceVersion: 1, overrides }");
  }
  const { basedOn, label, interfaceVersion } = definition;
  if (!['postgres', 'mysql', 'mariadb', 'sqlite'].includes(basedOn)) {
    throw new DeclarationError(`defineDialect: basedOn must be "postgres", "mysql", "mariadb" or "sqlite", got ${JSON.stringify(basedOn)}`);
  }
  if (typeof label !== 'string' || label === '') {
    throw new DeclarationError('defineDialect: label must name the dialect for errors, such as "postgres10"');
  }
  const base = createDialect(basedOn);
  const overrides = typeof definition.overrides === 'function' ? definition.overrides(base) : (definition.overrides ?? {});
  checkOverrideNames(overrides, label);
  const merged: Record<string, unknown> = {
    interfaceVersion,
    name: protocolOf(basedOn),
    label,
    basedOn,
    capabilities: Object.freeze({ ...base.capabilities, ...overrides.capabilities }),
    validateTable: overrides.validateTable ?? base.validateTable,
    checkServerVersion: overrides.checkServerVersion ?? base.checkServerVersion,
  };
  for (const group of DIALECT_GROUPS) {
    const replaced = overrides[group];
    merged[group] = replaced === undefined ? base[group] : Object.freeze({ ...base[group], ...replaced });
  }
  return Object.freeze(merged) as unknown as Dialect;
}

function checkOverrideNames(overrides: DialectOverrides, label: string): void {
  const unknown: string[] = [];
  for (const [key, value] of Object.entries(overrides)) {
    if (!OVERRIDE_KEYS.has(key)) {
      unknown.push(key);
      continue;
    }
    if (!(DIALECT_GROUPS as readonly string[]).includes(key) || value === undefined) continue;
    const known = new Set([
      ...DIALECT_MEMBERS.filter((member) => member.path.startsWith(`${key}.`)).map((member) => member.path.slice(key.length + 1).split('.')[0]!),
      ...(GROUP_VALUES[key as DialectGroup] ?? []),
    ]);
    unknown.push(...Object.keys(value as object).filter((name) => !known.has(name)).map((name) => `${key}.${name}`));
  }
  if (unknown.length === 0) return;
  throw new DeclarationError(
    `defineDialect "${label}": ${unknown.map((name) => `"${name}"`).join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not part of the Dialect; docs/dialects.md lists every statement`,
  );
}
