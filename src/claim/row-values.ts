import type { TableSpec } from '../table/table-spec.js';
import type { ClaimedRow } from './claim-form.js';

/**
 * Reads id and attempt from a claimed row. `attemptIsCounted` is true when the claim statement
 * returned the row after it added one to the attempt (SQLite's UPDATE … RETURNING).
 */
export function readClaimedRow(spec: TableSpec, row: Record<string, unknown>, attemptIsCounted: boolean): ClaimedRow {
  const idValue = row[spec.id.column];
  let attempt = 1;
  if (spec.attempt !== undefined) {
    const stored = Number(row[spec.attempt]);
    attempt = attemptIsCounted ? stored - 1 : stored;
    if (attemptIsCounted) row[spec.attempt] = attempt;
  }
  return { row, id: String(idValue), idValue, attempt };
}
