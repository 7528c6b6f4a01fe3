import { createDialect } from '../dialect/create-dialect.js';
import type { CreateTableOptions } from '../dialect/dialect.js';
import { DeclarationError } from '../errors.js';
import { validateQueueName } from './queue-name.js';
import { createTableSpec, type TableDeclaration, type TableSpec } from '../table/table-spec.js';

export type DdlDialectName = 'postgres' | 'mysql' | 'mariadb' | 'sqlite';

/**
 * A queue table the service owns, as declared. `queue(name)` addresses one of its queues;
 * `createTableSql(dialect)` renders DDL for the declared roles.
 */
export class QueueTable {
  readonly spec: TableSpec;

  constructor(declaration: TableDeclaration) {
    this.spec = createTableSpec(declaration);
  }

  /** A table from a spec already validated (one that crossed from a worker thread). */
  static fromSpec(spec: TableSpec): QueueTable {
    const table = Object.create(QueueTable.prototype) as { spec: TableSpec };
    table.spec = Object.freeze({ ...spec });
    return table as QueueTable;
  }

  /**
   * One queue of this table: the rows of group `name` on a grouped table, or the whole table
   * when it has no group column (the name is then only a label).
   */
  queue<Payload = unknown>(name: string): Queue<Payload> {
    return new Queue<Payload>(this, name);
  }

  /**
   * `CREATE TABLE` and the claim-order index, one statement per entry. `inWorkIndex: true` adds
   * the index concurrency limits count a lease table's rows in work through (see `CreateTableOptions`).
   */
  createTableSql(dialect: DdlDialectName, options: CreateTableOptions = {}): string[] {
    if (options.inWorkIndex === true && this.spec.lockedUntil === undefined) {
      throw new DeclarationError(
        `table "${this.spec.qualifiedName}": inWorkIndex indexes the lockedUntil column, and the table declares none; a row lock table's rows in work are its locked rows, which need no index`,
      );
    }
    const rendered = createDialect(dialect);
    rendered.validateTable(this.spec);
    return rendered.schema.createTable(this.spec, options);
  }
}

export class Queue<Payload = unknown> {
  readonly table: QueueTable;
  readonly name: string;
  /** Type-only marker so a queue's payload type flows into publish and subscribe. */
  declare readonly payloadType?: Payload;

  /** The name is checked here, so every way a queue is made (`queue()`, a thread, the outbox) refuses the same names. */
  constructor(table: QueueTable, name: string) {
    this.table = table;
    this.name = validateQueueName(name, `table "${table.spec.qualifiedName}": the queue name`);
  }

  /** The group value rows of this queue carry, or undefined on a table without groups. */
  get group(): string | undefined {
    return this.table.spec.group === undefined ? undefined : this.name;
  }

  /** `schema.table` or `table`, with the group when there is one: for messages. */
  get label(): string {
    return this.group === undefined ? this.table.spec.qualifiedName : `${this.table.spec.qualifiedName}/${this.name}`;
  }
}

/** Declares a queue table; every problem is a `DeclarationError` thrown here. */
export function defineTable(declaration: TableDeclaration): QueueTable {
  return new QueueTable(declaration);
}

/**
 * Refuses anything but a queue from `table.queue(name)`, which a caller from JavaScript may pass
 * where one is expected; `what` names the call in the message.
 */
export function requireQueue(value: unknown, what: string): asserts value is Queue<unknown> {
  if (!(value instanceof Queue)) throw new DeclarationError(`${what} needs a queue: table.queue("name") of a table from defineTable`);
}
