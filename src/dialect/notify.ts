import type { Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';

/**
 * Wake-ups across processes (Postgres `LISTEN`/`NOTIFY`). Each table has one channel, named by
 * its qualified name as declared and unquoted (`app.jobs`, or `jobs` without a schema); the
 * payload of a notification is the group of the row written, or empty text for every queue of
 * the table. Triggers that other programs' inserts fire use the same channel and payload.
 */
export interface NotifyStatements {
  /** The table's channel; a `DeclarationError` naming the table when the server would refuse it. */
  channel(spec: TableSpec): string;
  /** `LISTEN` on the table's channel, run on the broker's notification session. */
  listen(spec: TableSpec): Statement;
  /** `LISTEN` on a channel of the service's own that names no table (the queue controls' pause and resume). */
  listenTo(channel: string): Statement;
  /** Params `channel` and `group` (empty text wakes every subscription of the table). */
  notify(): Statement;
  /** The longest payload the server accepts, in bytes: a longer group cannot be sent. */
  readonly maxPayloadBytes: number;
}
