/**
 * What the claim forms do with a table's statements of the service's own (`defineTable({
 * statements })`): the combinations refused when a subscription opens, because the form could not
 * keep what it promises with them; the ids a claim of the service's own returns, taken and
 * fetched; and the settlements, extension and lock statements that replace the built-in ones.
 */
import { createServiceClaimStatements } from '../dialect/service-claim-statements.js';
import { renderServiceStatements } from '../dialect/service-statement-text.js';
import type { Connection } from '../driver/driver.js';
import { DeclarationError, StatementError, UnsupportedError } from '../errors.js';
import { bindStatement, type Statement } from '../statement.js';
import type { ClaimedRow, Settlement } from './claim-form.js';
import type { FormContext } from './form-context.js';

/** The settlement statements of the service's own: an ack and a drop both finish a row, each with its own text. */
export type SettlementStatementName = 'ack' | 'drop' | 'retry' | 'retryAfter' | 'deadLetter';

/** A finish that commits the handler's writes is an ack; any other (a drop, a cancelled message) a drop. */
export function settlementStatementNameOf(settlement: Settlement): SettlementStatementName {
  if (settlement.kind !== 'finish') return settlement.kind;
  return settlement.commitsHandlerWrites === true ? 'ack' : 'drop';
}

/** A table's statements of the service's own, rendered for its database, as a form runs them. */
export interface ServiceStatementSet {
  /** The ids to claim (`group`, `now`, `limit`); the form then takes and fetches them. */
  readonly claim: Statement | undefined;
  /** The lease form's take of each id a claim of the service's own returned. */
  readonly stamp: Statement | undefined;
  /** The row lock form's take of each such id. */
  readonly lock: Statement | undefined;
  /** The claimed rows by id: the service's, or after a claim of its own the built-in fetch (PostgreSQL). */
  readonly fetch: Statement | undefined;
  /** Per settlement, the statements that replace the built-in ones, run in order in one transaction. */
  readonly settlements: Readonly<Partial<Record<SettlementStatementName, readonly Statement[]>>>;
  /** Lease form: the renewal. */
  readonly extend: Statement | undefined;
  /** Advisory lock form: the session lock of a key and its release, together. */
  readonly sessionLock: { readonly lock: Statement; readonly unlock: Statement } | undefined;
  /** Every statement above, for the start-up prepare check. */
  readonly statements: readonly Statement[];
}

const SETTLEMENTS: readonly SettlementStatementName[] = ['ack', 'drop', 'retry', 'retryAfter', 'deadLetter'];

/**
 * The table's statements of the service's own for the form about to open, or undefined without
 * any. Throws a `DeclarationError` (or an `UnsupportedError`, where the database decides) for a
 * combination the form cannot keep its promises with, saying why.
 */
export function serviceStatementsOf(context: FormContext): ServiceStatementSet | undefined {
  const { spec, dialect } = context;
  const declared = spec.statements;
  if (declared === undefined || Object.keys(declared).length === 0) return undefined;
  refuseCombinations(context);
  const render = (name: Parameters<typeof renderServiceStatements>[0]) => renderServiceStatements(name, spec, dialect.name);
  const [claim] = render('claim');
  const [ownFetch] = render('fetch');
  if (ownFetch !== undefined && ownFetch.params.includes('id') === ownFetch.params.includes('ids')) {
    throw new DeclarationError(
      `table "${spec.qualifiedName}": statements.fetch must use ${dialect.name === 'postgres' ? 'either :ids (every claimed id, as an array) or :id (run once per id)' : ':id (run once per id)'}`,
    );
  }
  const taking = claim === undefined ? undefined : createServiceClaimStatements(dialect.name);
  const fetch = ownFetch ?? (claim === undefined ? undefined : taking?.fetch(spec, context.columns));
  const settlements: Partial<Record<SettlementStatementName, readonly Statement[]>> = {};
  for (const name of SETTLEMENTS) {
    const statements = render(name);
    if (statements.length > 0) settlements[name] = statements;
  }
  const [extend] = render('extend');
  const [lock] = render('lock');
  const [unlock] = render('unlock');
  const set = {
    claim,
    stamp: spec.form === 'lease' ? taking?.stamp(spec) : undefined,
    lock: spec.form === 'rowLock' ? taking?.lock(spec) : undefined,
    fetch,
    settlements,
    extend,
    sessionLock: lock !== undefined && unlock !== undefined ? { lock, unlock } : undefined,
  };
  const statements = [set.claim, set.stamp, set.lock, set.fetch, ...Object.values(settlements).flat(), extend, lock, unlock];
  return Object.freeze({ ...set, statements: statements.filter((statement) => statement !== undefined) });
}

function refuseCombinations(context: FormContext): void {
  const { spec, dialect, concurrency, rate } = context;
  const declared = spec.statements!;
  const where = `table "${spec.qualifiedName}"`;
  const form = { rowLock: 'row lock', lease: 'lease', advisory: 'advisory lock' }[spec.form];
  const refuse = (message: string) => {
    throw new DeclarationError(`${where}: ${message}; docs/service-statements.md lists what each form takes`);
  };
  if ((declared.lock === undefined) !== (declared.unlock === undefined)) {
    refuse(`statements.${declared.lock === undefined ? 'unlock' : 'lock'} comes without statements.${declared.lock === undefined ? 'lock' : 'unlock'}: a key your lock takes only your unlock can let go, so declare both or neither`);
  }
  if (declared.lock !== undefined && spec.form !== 'advisory') {
    refuse(`statements.lock and unlock replace the advisory lock form's session locks, and the table is in the ${form} form`);
  }
  if (declared.lock !== undefined && !dialect.capabilities.supportsSessionLocks) {
    throw new UnsupportedError({
      database: dialect.label,
      feature: 'a lock of your own',
      message: `${where}: statements.lock and unlock need session locks that every process sees, which ${dialect.label} lacks (its advisory keys live in the process's registry); remove them`,
    });
  }
  if (declared.extend !== undefined && spec.form !== 'lease') {
    refuse(`statements.extend renews a lease, and the table is in the ${form} form, which has none`);
  }
  if (declared.retryAfter !== undefined && spec.retryAfter === undefined) {
    refuse('statements.retryAfter would never run: without a retryAfter column a delayed retry goes back to the queue at once, through statements.retry');
  }
  if (declared.claim === undefined) return;
  if (spec.form === 'advisory') {
    refuse("statements.claim cannot serve the advisory lock form, whose claim takes each row under its key's lock, found by the candidate select");
  }
  if (spec.group?.fifo === true) {
    refuse("statements.claim cannot serve FIFO groups: only tablequeue's claim takes a group's head alone, and never while a row of the group is in work");
  }
  if (concurrency?.perKey !== undefined || rate?.byKeyTable !== undefined) {
    refuse(`statements.claim cannot keep ${concurrency?.perKey !== undefined ? 'concurrency.perKey' : 'rate.key'}: each key's room is counted inside tablequeue's claim statement; limit the whole queue, or use tablequeue's claim`);
  }
  if (declared.fetch === undefined && createServiceClaimStatements(dialect.name).fetch(spec, context.columns) === undefined) {
    throw new UnsupportedError({
      database: dialect.label,
      feature: 'a claim of your own without a fetch',
      message: `${where}: statements.claim returns ids, and on ${dialect.label} tablequeue has no statement that reads the rows of a list of ids (it binds no lists), so declare statements.fetch, a SELECT of the row whose id is :id`,
    });
  }
}

/**
 * Reads the rows of `ids` through the set's fetch, in the order of `ids`: in one statement with
 * `:ids`, or one per id with `:id`. A row the fetch does not return fails the claim: a
 * `StatementError` naming `statements.fetch` and the ids, after which the form returns the claim's
 * rows to the queue.
 */
export async function fetchRows(
  connection: Connection,
  context: Pick<FormContext, 'spec' | 'dialect'>,
  fetch: Statement,
  ids: readonly unknown[],
): Promise<Record<string, unknown>[]> {
  if (ids.length === 0) return [];
  const idColumn = context.spec.id.column;
  const rows: Record<string, unknown>[] = [];
  if (fetch.params.includes('ids')) rows.push(...(await connection.execute(bindStatement(fetch, { ids: [...ids] }))).rows);
  else for (const id of ids) rows.push(...(await connection.execute(bindStatement(fetch, { id }))).rows);
  const byId = new Map<string, Record<string, unknown>>();
  for (const row of rows) {
    if (!(idColumn in row)) throw resultProblem(context, fetch, `returns no column "${idColumn}", the table's id`);
    byId.set(String(row[idColumn]), row);
  }
  const missing = ids.filter((id) => !byId.has(String(id)));
  if (missing.length > 0) {
    throw resultProblem(context, fetch, `returned no row for claimed ${missing.length === 1 ? 'id' : 'ids'} ${missing.map(String).join(', ')}; they go back to the queue`);
  }
  return ids.map((id) => byId.get(String(id))!);
}

/**
 * The ids a claim of the service's own returned, each once and at most `limit` of them, in the
 * order it returned them; a `StatementError` when its rows lack the table's id column.
 */
export function claimedIds(
  rows: readonly Record<string, unknown>[],
  context: Pick<FormContext, 'spec' | 'dialect'>,
  claim: Statement,
  limit: number,
): unknown[] {
  const idColumn = context.spec.id.column;
  const ids = new Map<string, unknown>();
  for (const row of rows) {
    if (!(idColumn in row)) throw resultProblem(context, claim, `returns no column "${idColumn}", the table's id`);
    const id = row[idColumn];
    if (ids.size < limit && !ids.has(String(id))) ids.set(String(id), id);
  }
  return [...ids.values()];
}

function resultProblem(context: Pick<FormContext, 'spec' | 'dialect'>, statement: Statement, problem: string): StatementError {
  const message = `table "${context.spec.qualifiedName}": ${statement.name} ${problem}`;
  return new StatementError({ statement: statement.name, database: context.dialect.label, cause: new Error(message), message });
}

/**
 * A row as the fetch read it, with the attempt the claim read: the handler sees the fetch's
 * columns, and the attempt before this claim counted it, whatever the fetch's text reads.
 */
export function withFetchedRow(claimed: ClaimedRow, fetched: Record<string, unknown>, attemptColumn: string | undefined): ClaimedRow {
  if (attemptColumn !== undefined && attemptColumn in fetched) fetched[attemptColumn] = claimed.attempt;
  return { ...claimed, row: fetched };
}
