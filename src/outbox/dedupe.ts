import type { DdlDialectName } from '../definition/define-table.js';
import { DeliveryTransaction } from '../delivery/delivery-transaction.js';
import type { Dialect } from '../dialect/dialect.js';
import {
  createSeenStatements,
  renderSeenCreateTable,
  SEEN_CONSUMER_COLUMN,
  SEEN_RECORD_ID_COLUMN,
  type SeenStatements,
} from '../dialect/outbox-seen-statements.js';
import { withConnection } from '../driver/connection-scope.js';
import type { Driver } from '../driver/driver.js';
import { DeclarationError, SchemaError, StatementError } from '../errors.js';
import { bindStatement, type BoundStatement } from '../statement.js';
import { validateIdentifier } from '../table/identifier.js';
import type { Handler } from '../subscription/subscription-options.js';
import { OUTBOX_RECORD_ID_HEADER } from './destination.js';

/** What `defineDedupeTable` (and the subscribe option `dedupe`) accepts. */
export interface DedupeDeclaration {
  readonly table: string;
  readonly schema?: string | undefined;
}

/**
 * The table where deduplicating subscriptions note the outbox record ids they handled: columns
 * `consumer` (the subscription's queue), `record_id` and `seen_at`, keyed by the first two. One
 * table serves every subscription of a service. Delete old rows by `seen_at` as suits the
 * service: a record resent after its row is gone is handled again.
 */
export class DedupeTable implements DedupeDeclaration {
  readonly table: string;
  readonly schema: string | undefined;

  constructor(declaration: DedupeDeclaration) {
    if (declaration === null || typeof declaration !== 'object') {
      throw new DeclarationError("dedupe needs an object such as { table: 'tablequeue_seen' }");
    }
    for (const key of Object.keys(declaration)) {
      if (key !== 'table' && key !== 'schema') {
        throw new DeclarationError(`dedupe: unknown key "${key}"; the keys are table and schema`);
      }
    }
    this.table = validateIdentifier(declaration.table, 'dedupe table');
    this.schema = declaration.schema === undefined ? undefined : validateIdentifier(declaration.schema, 'schema of the dedupe table');
  }

  get qualifiedName(): string {
    return this.schema === undefined ? this.table : `${this.schema}.${this.table}`;
  }

  /** `CREATE TABLE` of the seen table, one statement per entry. */
  createTableSql(dialect: DdlDialectName): string[] {
    return renderSeenCreateTable(dialect, { schema: this.schema, name: this.table });
  }
}

export function defineDedupeTable(declaration: DedupeDeclaration): DedupeTable {
  return declaration instanceof DedupeTable ? declaration : new DedupeTable(declaration);
}

/**
 * A subscription's dedupe: a message that carries an outbox record id its consumer already
 * handled is acked without calling the handler.
 *
 * - Transactional mode: the pair is inserted first in the delivery's transaction. It commits
 *   with the ack, and every other outcome rolls it back with the handler's writes. A duplicate
 *   delivered at the same time waits for that transaction on the key, then skips. Exactly once.
 * - Otherwise: a lookup before the handler and an insert after it acked, each on its own
 *   connection. A crash between the handler and the insert, or two copies handled at once, call
 *   the handler twice: at least once.
 *
 * Messages without the header go to the handler as they are.
 */
export class DedupeGate {
  readonly #table: DedupeTable;
  readonly #consumer: string;
  readonly #isTransactional: boolean;
  #statements: SeenStatements | undefined;

  constructor(declaration: DedupeDeclaration, options: { consumer: string; transactional: boolean }) {
    this.#table = defineDedupeTable(declaration);
    this.#consumer = options.consumer;
    this.#isTransactional = options.transactional;
  }

  /** Renders and prepares the statements; a missing seen table fails `start()` with a `SchemaError`. */
  async open(driver: Driver, dialect: Dialect): Promise<void> {
    const statements = createSeenStatements(dialect.name, { schema: this.#table.schema, name: this.#table.table });
    await withConnection(driver, async (connection) => {
      for (const statement of [statements.find, statements.insert]) {
        const placeholders = Object.fromEntries(statement.params.map((param) => [param, null]));
        try {
          await connection.prepare(bindStatement(statement, placeholders));
        } catch (error) {
          if (!(error instanceof StatementError)) throw error;
          const table = this.#table.qualifiedName;
          throw new SchemaError({
            table,
            statement: statement.name,
            message: `dedupe table "${table}": statement "${statement.name}" does not prepare on ${error.database}; create it with defineDedupeTable(...).createTableSql()`,
            cause: error,
          });
        }
      }
    });
    this.#statements = statements;
  }

  wrap<Payload>(handler: Handler<Payload>): Handler<Payload> {
    return async (message, context) => {
      const recordId = message.headers[OUTBOX_RECORD_ID_HEADER];
      if (recordId === undefined) return handler(message, context);
      const statements = this.#statements;
      if (statements === undefined) throw new TypeError('the dedupe table was not opened before the first delivery');
      const values = { [`column:${SEEN_CONSUMER_COLUMN}`]: this.#consumer, [`column:${SEEN_RECORD_ID_COLUMN}`]: recordId };
      if (this.#isTransactional) {
        const tx = context.tx;
        if (!(tx instanceof DeliveryTransaction)) throw new TypeError('a transactional delivery came without its transaction');
        const inserted = await tx.asConnection().execute(bindStatement(statements.insert, values));
        if (inserted.affectedRows === 0) return undefined;
        return handler(message, context);
      }
      if ((await run(context.query, bindStatement(statements.find, values))).length > 0) return undefined;
      const outcome = await handler(message, context);
      if (outcome === undefined || outcome === null || outcome.kind === 'ack') {
        await run(context.query, bindStatement(statements.insert, values));
      }
      return outcome;
    };
  }
}

function run(query: (sql: string, params: readonly unknown[]) => Promise<unknown[]>, statement: BoundStatement): Promise<unknown[]> {
  return query(statement.sql, statement.values);
}

/**
 * The `dedupe` subscribe option, checked against the other options: a deduplicated handler runs
 * on the main thread, one message at a time.
 */
export function createDedupeGate(
  declaration: DedupeDeclaration | undefined,
  options: { consumer: string; transactional: boolean; batch: number | undefined; isOnThreads: boolean },
): DedupeGate | undefined {
  if (declaration === undefined) return undefined;
  const where = `subscription "${options.consumer}"`;
  if (options.batch !== undefined) {
    throw new DeclarationError(`${where}: dedupe reads one message at a time, so it cannot be combined with batch; remove one of them`);
  }
  if (options.isOnThreads) {
    throw new DeclarationError(`${where}: dedupe wraps a handler on the main thread, so it cannot be combined with onThreads; remove one of them`);
  }
  return new DedupeGate(declaration, options);
}
