import { decodeHeaders } from '../delivery/codec.js';
import type { TableSpec } from '../table/table-spec.js';
import { OUTBOX_RECORD_ID_HEADER, type OutboxRecord } from './destination.js';

/** The rows a claim of one name returned, as the destination gets them: in id order, each with its id header. */
export function claimedRecords(spec: TableSpec, rows: readonly Record<string, unknown>[]): OutboxRecord[] {
  return rows.map((row) => recordOf(spec, row)).sort(byRecordId);
}

function recordOf(spec: TableSpec, row: Record<string, unknown>): OutboxRecord {
  const id = String(row[spec.id.column]);
  const payload = row[spec.payload!];
  const written = spec.headers === undefined ? {} : decodeHeaders(row[spec.headers]);
  return {
    id,
    name: String(row[spec.group!.column]),
    payload: Buffer.isBuffer(payload) ? payload : Buffer.from(payload as Uint8Array),
    headers: { ...written, [OUTBOX_RECORD_ID_HEADER]: id },
  };
}

/** Record order is id order; generated ids are integers, compared as such whatever their length. */
function byRecordId(left: OutboxRecord, right: OutboxRecord): number {
  const a = BigInt(left.id);
  const b = BigInt(right.id);
  return a < b ? -1 : a > b ? 1 : 0;
}
