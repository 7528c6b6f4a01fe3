import { GROUP_GUARD_COLUMN, type Dialect } from '../dialect/dialect.js';
import { fifoGuardRowsFor, GUARD_ROW_COLUMN } from '../dialect/fifo-guard-statements.js';
import type { TableSpec } from '../table/table-spec.js';
import type { Connection } from '../driver/driver.js';
import { executeAll } from '../driver/connection-scope.js';
import { bindStatement, type BoundStatement, type ParamValues, type Statement } from '../statement.js';

/**
 * What a claim does when its group has no guard row (MySQL, MariaDB): `add` inserts it, and
 * `restart` (COMMIT, then the claim's own begin) commits the insert at once and opens the
 * claim's transaction again. Committed at once, the row is there for every other claim: left in a
 * row lock claim's transaction, it would stay uncommitted for the whole delivery, and another
 * claim of the group, finding no row it can see, would wait on its insert of the same row.
 */
export interface GuardRowAddition {
  readonly add: Statement;
  readonly restart: readonly Statement[];
}

/**
 * Runs the FIFO group guard first in the claim's transaction: true when this claim owns the group.
 * `begin`, when given, opens the transaction in the same round trip as the guard where the
 * client pipelines (`executeAll`); without it the transaction is open already, with nothing run
 * in it. When another claim owns the group, the caller rolls back, dropping whatever the guard
 * locked, and the claim takes nothing. Where the guard is a row of a guard table and the group has
 * none, `guardRow` adds it and the guard is asked again in a fresh transaction.
 */
export async function ownsGroup(
  connection: Connection,
  guard: Statement,
  values: ParamValues,
  guardRow?: GuardRowAddition,
  begin: readonly BoundStatement[] = [],
): Promise<boolean> {
  const answer = (await executeAll(connection, [...begin, bindStatement(guard, values)])).at(-1)!.rows[0];
  if (Number(answer?.[GROUP_GUARD_COLUMN]) === 1) return true;
  if (guardRow === undefined || answer?.[GUARD_ROW_COLUMN] === undefined || Number(answer[GUARD_ROW_COLUMN]) !== 0) return false;
  await connection.execute(bindStatement(guardRow.add, values));
  for (const statement of guardRow.restart) await connection.execute(bindStatement(statement, values));
  const again = (await connection.execute(bindStatement(guard, values))).rows[0];
  return Number(again?.[GROUP_GUARD_COLUMN]) === 1;
}

/** The guard row addition of a FIFO table on MySQL and MariaDB, for a claim whose transaction opens with `begin`; undefined elsewhere. */
export function guardRowAddition(dialect: Dialect, spec: TableSpec, begin: readonly Statement[]): GuardRowAddition | undefined {
  const rows = spec.group?.fifo === true ? fifoGuardRowsFor(dialect.name) : undefined;
  return rows === undefined ? undefined : { add: rows.addRow(spec), restart: [dialect.session.commit(), ...begin] };
}
