import { GROUP_GUARD_COLUMN } from '../dialect/dialect.js';
import type { Connection } from '../driver/driver.js';
import { bindStatement, type ParamValues, type Statement } from '../statement.js';

/**
 * Runs the FIFO group guard in the open claim transaction: true when this claim owns the group.
 * When another claim owns it, the caller rolls back, dropping whatever the guard locked, and the
 * claim takes nothing.
 */
export async function ownsGroup(connection: Connection, guard: Statement, values: ParamValues): Promise<boolean> {
  const answer = (await connection.execute(bindStatement(guard, values))).rows[0];
  return Number(answer?.[GROUP_GUARD_COLUMN]) === 1;
}
