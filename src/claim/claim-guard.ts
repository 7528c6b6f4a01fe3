import { GROUP_GUARD_COLUMN, type LeaseClaim } from '../dialect/dialect.js';
import type { Connection } from '../driver/driver.js';
import { bindStatement, type ParamValues, type Statement } from '../statement.js';

/** The session statements a guarded claim ends its transaction with. */
export interface ClaimSession {
  readonly commit: Statement;
  readonly rollback: Statement;
}

/**
 * Runs the FIFO group guard in the open claim transaction: true when this claim owns the group.
 * When another claim owns it, rolls back, dropping whatever the guard locked, and the claim
 * takes nothing.
 */
export async function ownsGroup(connection: Connection, guard: Statement, values: ParamValues, rollback: Statement): Promise<boolean> {
  const answer = (await connection.execute(bindStatement(guard, values))).rows[0];
  if (Number(answer?.[GROUP_GUARD_COLUMN]) === 1) return true;
  await connection.execute(bindStatement(rollback, {}));
  return false;
}

/** A one-statement lease claim; on a guarded FIFO claim (Postgres), inside its own transaction behind the guard. */
export async function runSingleClaim(
  connection: Connection,
  claim: Extract<LeaseClaim, { kind: 'single' }>,
  values: ParamValues,
  session: ClaimSession,
): Promise<Record<string, unknown>[]> {
  if (claim.guarded === undefined) return (await connection.execute(bindStatement(claim.statement, values))).rows;
  for (const statement of claim.guarded.begin) await connection.execute(bindStatement(statement, {}));
  if (!(await ownsGroup(connection, claim.guarded.guard, values, session.rollback))) return [];
  const rows = (await connection.execute(bindStatement(claim.statement, values))).rows;
  await connection.execute(bindStatement(session.commit, {}));
  return rows;
}
