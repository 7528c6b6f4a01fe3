import { DeclarationError } from '../../errors.js';
import { POSTGRES_MAX_IDENTIFIER_BYTES } from '../../table/identifier.js';
import type { TableSpec } from '../../table/table-spec.js';
import type { NotifyStatements } from '../notify.js';
import { DOUBLE_QUOTE_STYLE, identifier, param, renderStatement, sql } from '../quoting.js';

/** `pg_notify` refuses a payload of 8,000 bytes or more (the server's default page size). */
const MAX_PAYLOAD_BYTES = 7_999;

export function createPostgresNotifyStatements(): NotifyStatements {
  const notify = renderStatement(DOUBLE_QUOTE_STYLE, 'notify.notify', sql`SELECT pg_notify(${param('channel')}, ${param('group')})`);
  return Object.freeze({
    channel,
    listen: (spec: TableSpec) => renderStatement(DOUBLE_QUOTE_STYLE, 'notify.listen', sql`LISTEN ${identifier(channel(spec))}`),
    listenTo: (name: string) => renderStatement(DOUBLE_QUOTE_STYLE, 'notify.listen', sql`LISTEN ${identifier(name)}`),
    notify: () => notify,
    maxPayloadBytes: MAX_PAYLOAD_BYTES,
  });
}

/**
 * A channel is an identifier: `LISTEN` would truncate a longer name to 63 bytes while
 * `pg_notify` refuses it, so publishes and the listener would never meet.
 */
function channel(spec: TableSpec): string {
  const name = spec.qualifiedName;
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > POSTGRES_MAX_IDENTIFIER_BYTES) {
    throw new DeclarationError(
      `table "${name}": its notification channel "${name}" is ${bytes} bytes long and PostgreSQL allows at most ${POSTGRES_MAX_IDENTIFIER_BYTES}; ` +
        'shorten the schema or table name, or turn wake-ups across processes off with listen: false',
    );
  }
  return name;
}
