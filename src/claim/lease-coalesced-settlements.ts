import type { DeadLetterTarget, Dialect, LeaseSettleMany, LeaseSettleManyRequest, TableColumns } from '../dialect/dialect.js';
import { withTransaction } from '../driver/connection-scope.js';
import type { Driver } from '../driver/driver.js';
import { bindRepeated, bindStatement, type BoundStatement, type ParamValues, type Statement } from '../statement.js';
import type { TableSpec } from '../table/table-spec.js';
import type { Settlement } from './claim-form.js';
import { LEASE_COMMITS, type LeaseSlot } from './lease-book.js';
import { SettlementCoalescer } from './settlement-coalescer.js';
import { powerOfTwoAtLeast } from '../internal/power-of-two.js';

/**
 * The most settlements one statement carries. Statements with a placeholder per row are rendered
 * for a power of two of rows up to this (padded with the last row), so a table has at most nine
 * texts per kind to prepare.
 */
export const MAX_SETTLEMENTS_PER_STATEMENT = 256;

export interface LeaseCoalescedSettlementsContext {
  readonly driver: Driver;
  readonly dialect: Dialect;
  readonly spec: TableSpec;
  readonly columns: TableColumns;
  readonly deadLetter: DeadLetterTarget | undefined;
  /** See `SettlementCoalescerOptions.windowMs`. */
  readonly windowMs: number;
}

/**
 * What a coalesced settlement learnt: `settled`; `notCarried` when no row carried the slot's
 * token; `failed` when the statement failed for the whole window, which changed nothing.
 */
export type CoalescedAnswer = 'settled' | 'notCarried' | 'failed';

interface Pending {
  readonly slot: LeaseSlot;
  readonly settlement: Settlement;
  /** The settlement's promise's own resolve: no deferred record per settlement (nothing rejects it). */
  readonly answer: (answer: CoalescedAnswer) => void;
}

/**
 * Settlement coalescing for the lease form: settlements that arrive within a window go to the
 * database in one statement per kind, each row fenced by its own token, and each settlement
 * learns on its own whether its row still carried that token. A statement that fails changed
 * nothing (one statement, or a transaction rolled back), and every settlement it carried hears
 * `failed`, so the form settles each alone and the error reaches only the row that causes it.
 */
export class LeaseCoalescedSettlements {
  readonly #context: LeaseCoalescedSettlementsContext;
  readonly #coalescer: SettlementCoalescer<Pending>;
  readonly #rendered = new Map<string, LeaseSettleMany | undefined>();
  /**
   * Per settlement kind, read on every settlement: whether it joins a window, and the window it
   * joins (the statement kind it becomes). Rendering a request to ask cost 0.3 µs a message.
   */
  readonly #kinds: Readonly<Record<Settlement['kind'], { readonly isAccepted: boolean; readonly window: LeaseSettleManyRequest['kind'] }>>;
  readonly #commit: Statement;
  readonly #rollback: Statement;

  constructor(context: LeaseCoalescedSettlementsContext) {
    this.#context = context;
    this.#commit = context.dialect.session.commit();
    this.#rollback = context.dialect.session.rollback();
    const kindOf = (kind: Settlement['kind']) => {
      const request = this.#requestOf(kind, 1);
      const isDeadLetterWithHeaders = kind === 'deadLetter' && context.spec.headers !== undefined;
      return { isAccepted: !isDeadLetterWithHeaders && this.#render(request) !== undefined, window: request.kind };
    };
    this.#kinds = { finish: kindOf('finish'), retry: kindOf('retry'), retryAfter: kindOf('retryAfter'), deadLetter: kindOf('deadLetter') };
    this.#coalescer = new SettlementCoalescer<Pending>({
      windowMs: context.windowMs,
      maxSize: MAX_SETTLEMENTS_PER_STATEMENT,
      flush: (_kind, items) => this.#flush(items),
    });
  }

  /** The one-row shapes of every kind this table settles together, for the start-up prepare check. */
  get statements(): Statement[] {
    const kinds: Settlement['kind'][] = ['finish', 'retry', 'retryAfter', 'deadLetter'];
    return kinds.flatMap((kind) => {
      const rendered = this.#render(this.#requestOf(kind, 1));
      if (rendered === undefined) return [];
      return rendered.kind === 'returning' ? [rendered.statement] : [rendered.lock, rendered.write];
    });
  }

  /**
   * Whether `settlement` can join others here: a dead letter into a table on MySQL and SQLite
   * cannot, nor one on a table with headers, which records its own row's last error there.
   */
  accepts(settlement: Settlement): boolean {
    return this.#kinds[settlement.kind].isAccepted;
  }

  /** Settles the slot's row under its current token together with whatever else arrives in the window. */
  settle(slot: LeaseSlot, settlement: Settlement): Promise<CoalescedAnswer> {
    const window = this.#kinds[settlement.kind].window;
    return new Promise((answer) => this.#coalescer.add(window, { slot, settlement, answer }));
  }

  /** Sends the open windows now, without waiting for their time. */
  flushWaiting(): void {
    void this.#coalescer.flushNow();
  }

  /** Stop began: flush what waits, and from now on wait only for the rest of an event-loop turn. */
  flushNow(): Promise<void> {
    return this.#coalescer.flushNow({ thenImmediately: true });
  }

  async #flush(items: Pending[]): Promise<void> {
    const first = items[0];
    if (first === undefined) return;
    const { spec } = this.#context;
    const rendered = this.#render(this.#requestOf(first.settlement.kind, items.length))!;
    let settled: Record<string, unknown>[];
    try {
      settled = await this.#run(rendered, items);
    } catch {
      for (const item of items) item.answer('failed');
      return;
    }
    const ids = new Set(settled.map((row) => String(row[spec.id.column])));
    for (const item of items) item.answer(ids.has(item.slot.id) ? 'settled' : 'notCarried');
  }

  async #run(rendered: LeaseSettleMany, items: Pending[]): Promise<Record<string, unknown>[]> {
    const { driver } = this.#context;
    if (rendered.kind === 'returning') {
      const statement = this.#bind(rendered, rendered.statement, items);
      return (await driver.executeWrite(statement, LEASE_COMMITS)).rows;
    }
    const session = { begin: rendered.begin, commit: this.#commit, rollback: this.#rollback };
    return withTransaction(driver, session, async (_transaction, connection) => {
      const locked = (await connection.execute(this.#bind(rendered, rendered.lock, items))).rows;
      if (locked.length > 0) await connection.execute(this.#bind(rendered, rendered.write, items));
      return locked;
    }, { acquire: LEASE_COMMITS });
  }

  #bind(rendered: LeaseSettleMany, statement: Statement, items: Pending[]): BoundStatement {
    const first = items[0]!.settlement;
    const shared: ParamValues = {
      now: new Date(),
      destination: first.kind === 'deadLetter' && first.target.kind === 'group' ? first.target.group : undefined,
    };
    if (rendered.rowParams === 'arrays') {
      // Arrays of text: ids as the text Message.id carries, whatever the driver returned.
      return bindStatement(statement, {
        ...shared,
        ids: items.map((item) => item.slot.id),
        helds: items.map((item) => item.slot.token),
        retryAfterAts: items.map((item) => retryAfterAtOf(item.settlement)),
      });
    }
    const rows = items.map(({ slot, settlement }) => ({ id: slot.idValue, held: slot.token, retryAfterAt: retryAfterAtOf(settlement) }));
    return bindRepeated(statement, rows, shared, 'held');
  }

  #requestOf(kind: Settlement['kind'], itemCount: number): LeaseSettleManyRequest {
    const { spec, deadLetter } = this.#context;
    const rowCount = roundUpToPowerOfTwo(itemCount);
    switch (kind) {
      case 'finish':
        return { kind: 'finish', rowCount };
      case 'retry':
        return { kind: 'release', rowCount };
      case 'retryAfter':
        // As the one-row path: without a retryAfter column a delayed retry is a release.
        return { kind: spec.retryAfter === undefined ? 'release' : 'retryAfter', rowCount };
      case 'deadLetter':
        return deadLetter === undefined ? { kind: 'release', rowCount } : { kind: 'deadLetter', rowCount, target: deadLetter };
    }
  }

  #render(request: LeaseSettleManyRequest): LeaseSettleMany | undefined {
    const key = `${request.kind}:${request.rowCount}`;
    if (this.#rendered.has(key)) return this.#rendered.get(key);
    const { dialect, spec, columns } = this.#context;
    const rendered = dialect.lease.settleMany(spec, columns, request);
    this.#rendered.set(key, rendered);
    return rendered;
  }
}

function retryAfterAtOf(settlement: Settlement): Date | undefined {
  return settlement.kind === 'retryAfter' ? settlement.at : undefined;
}

function roundUpToPowerOfTwo(count: number): number {
  return Math.min(powerOfTwoAtLeast(count), MAX_SETTLEMENTS_PER_STATEMENT);
}
