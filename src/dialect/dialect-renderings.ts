/**
 * Every way tablequeue asks a dialect for text about one queue table, each with the arguments
 * the library passes. The broker renders them with a service's own dialect and with the built-in
 * it follows at `start()`; the dialect kit (tablequeue/testing) renders them over tables of
 * every shape. A method of the `Dialect` missing here would go unchecked: the catalogue's test
 * walks the built-ins and finds each one here.
 */
import type { Statement } from '../statement.js';
import { ISOLATION_LEVELS, SQLITE_BEGIN_MODES, type ClaimFormName, type TableSpec } from '../table/table-spec.js';
import type { AdvisoryTake } from './advisory-statements.js';
import type {
  DeadLetterTarget,
  Dialect,
  DialectCapabilities,
  LeaseClaim,
  LeaseSettleMany,
  LeaseSettleManyRequest,
  TableColumns,
} from './dialect.js';
import { parseRateLimitsTable, DEFAULT_RATE_LIMITS_TABLE } from './rate-limit-statements.js';

/** One part of what a rendering returned: a statement, DDL text, or plain text (a channel name). */
export interface RenderedPart {
  /** Where in the returned value: `statement`, `guarded.guard`, `begin[1]`, `stampAll(2)`. */
  readonly part: string;
  readonly kind: 'statement' | 'ddl' | 'text';
  readonly statement: Statement;
}

/** What a rendering returned, as a shape and its parts. */
export interface Rendered {
  /**
   * The shape: `statement`, `none` (undefined: the dialect has no statement there), `2 statements`,
   * `single guarded`, `selectThenStamp guard stampAll`, `lockThenWrite repeated`, or a value.
   */
  readonly shape: string;
  readonly parts: readonly RenderedPart[];
}

/**
 * How the library binds a statement's values: by name in any order (`names`), by name with one
 * occurrence per row, so each name occurs as often as in the built-in (`rows`), or in placeholder
 * order (`order`: an insert's column values, row after row).
 */
export type Binding = 'names' | 'rows' | 'order';

export interface DialectRendering {
  /** The method asked: `lease.claim`. */
  readonly method: string;
  /** What varies between renderings of one method: `perKey`, `finish, 2 rows`; empty when nothing. */
  readonly variant: string;
  /** The claim forms whose subscriptions ask for it; undefined: every form, and publishing. */
  readonly forms: readonly ClaimFormName[] | undefined;
  /** A capability the dialect must claim for the library to ask (notify: `supportsListenNotify`). */
  readonly needs: keyof DialectCapabilities | undefined;
  readonly binding: Binding;
  render(dialect: Dialect): Rendered;
}

/** A table as a subscription finds it: its spec and the columns the database reports. */
export interface RenderedTable {
  readonly spec: TableSpec;
  readonly columns: TableColumns;
}

/** Row counts that statements for many rows are rendered with: one row, and more than one. */
const ROW_COUNTS = [1, 2] as const;

const SETTLE_KINDS: readonly LeaseSettleManyRequest['kind'][] = ['finish', 'release', 'retryAfter', 'deadLetter'];

/** Every rendering the library can ask of a dialect for `table`. */
export function dialectRenderings(table: RenderedTable): DialectRendering[] {
  const { spec, columns } = table;
  const renderings: DialectRendering[] = [];
  const add = (
    method: string,
    variant: string,
    render: (dialect: Dialect) => Rendered,
    options: { forms?: readonly ClaimFormName[]; needs?: keyof DialectCapabilities; binding?: Binding } = {},
  ): void => {
    renderings.push({
      method,
      variant,
      forms: options.forms,
      needs: options.needs,
      binding: options.binding ?? 'names',
      render,
    });
  };
  const deadLetter = deadLetterTargetOf(spec);
  const published = publishedColumns(spec);

  add('session.begin', '', (d) => statements('begin', d.session.begin()));
  for (const isolation of ISOLATION_LEVELS) {
    add('session.begin', `isolation ${isolation}`, (d) => statements('begin', d.session.begin({ isolation })));
  }
  for (const sqliteBegin of SQLITE_BEGIN_MODES) {
    add('session.begin', `sqliteBegin ${sqliteBegin}`, (d) => statements('begin', d.session.begin({ sqliteBegin })));
  }
  add('session.commit', '', (d) => one(d.session.commit()));
  add('session.rollback', '', (d) => one(d.session.rollback()));
  add('session.savepoint', '', (d) => one(d.session.savepoint()), { forms: ['rowLock'] });
  add('session.rollbackToSavepoint', '', (d) => one(d.session.rollbackToSavepoint()), { forms: ['rowLock'] });
  add('session.serverVersion', '', (d) => one(d.session.serverVersion()));

  const rowLock = { forms: ['rowLock'], needs: 'supportsRowLock' } as const;
  add('rowLock.claim', '', (d) => one(d.rowLock.claim(spec, columns)), rowLock);
  add('rowLock.retry', '', (d) => one(d.rowLock.retry(spec)), rowLock);
  add('rowLock.retryAfter', '', (d) => one(d.rowLock.retryAfter(spec)), rowLock);
  for (const rowCount of ROW_COUNTS) {
    add('rowLock.finishMany', rowsVariant(rowCount), (d) => one(d.rowLock.finishMany?.(spec, rowCount)), { ...rowLock, binding: 'rows' });
  }

  const lease = { forms: ['lease'] } as const;
  add('lease.claim', '', (d) => leaseClaim(d.lease.claim(spec, columns)), lease);
  add('lease.claim', 'perKey', (d) => leaseClaim(d.lease.claim(spec, columns, { perKey: true })), lease);
  add(
    'lease.claim',
    'rate per key',
    (d) => leaseClaim(d.lease.claim(spec, columns, { rateByKey: parseRateLimitsTable(DEFAULT_RATE_LIMITS_TABLE, d.name) })),
    lease,
  );
  add('lease.release', '', (d) => one(d.lease.release(spec)), lease);
  add('lease.retryAfter', '', (d) => one(d.lease.retryAfter(spec)), lease);
  add('lease.extend', '', (d) => one(d.lease.extend(spec)), lease);
  add('lease.confirm', '', (d) => one(d.lease.confirm(spec)), lease);
  for (const kind of SETTLE_KINDS) {
    for (const rowCount of ROW_COUNTS) {
      const request: LeaseSettleManyRequest = kind === 'deadLetter' ? { kind, rowCount, target: deadLetter } : { kind, rowCount };
      add('lease.settleMany', `${kind}, ${rowsVariant(rowCount)}`, (d) => settleMany(d.lease.settleMany(spec, columns, request)), {
        ...lease,
        binding: 'rows',
      });
    }
  }

  add('fifo.guard', '', (d) => one(d.fifo.guard(spec)), { forms: ['rowLock', 'lease'] });

  const advisory = { forms: ['advisory'] } as const;
  add('advisory.candidates', '', (d) => one(d.advisory.candidates(spec)), advisory);
  add('advisory.lock', '', (d) => one(d.advisory.lock()), { ...advisory, needs: 'supportsSessionLocks' });
  add('advisory.unlock', '', (d) => one(d.advisory.unlock()), { ...advisory, needs: 'supportsSessionLocks' });
  add('advisory.take', '', (d) => advisoryTake(d.advisory.take(spec, columns)), advisory);
  add('advisory.retryAfter', '', (d) => one(d.advisory.retryAfter(spec)), advisory);
  add('advisory.keyOf', '', (d) => one(d.advisory.keyOf(spec)), advisory);
  add('advisory.slotKeys', '', (d) => one(d.advisory.slotKeys(spec)), advisory);

  for (const fenced of [false, true]) {
    const forms: readonly ClaimFormName[] = fenced ? ['lease'] : ['rowLock', 'advisory'];
    add('settle.finish', fenced ? 'fenced' : '', (d) => one(d.settle.finish(spec, { fenced })), { forms });
    add('settle.deadLetter', `${deadLetter.kind}${fenced ? ', fenced' : ''}`, (d) => statements('statements', d.settle.deadLetter(spec, columns, deadLetter, { fenced })), {
      forms,
    });
  }

  const insertOptions = [
    { variant: '', options: {} },
    { variant: 'due as delay', options: { retryAfterAsDelay: true } },
    { variant: 'held keys skipped', options: { skipHeldKeys: true } },
  ];
  for (const { variant, options } of insertOptions) {
    for (const rowCount of ROW_COUNTS) {
      add(
        'insert.rows',
        [variant, rowsVariant(rowCount)].filter((text) => text !== '').join(', '),
        (d) => one(insertRows(d, spec, published, rowCount, options)),
        { binding: 'order' },
      );
    }
  }

  add('dedupe.heldKeyOnInsert', '', (d) => value(d.dedupe.heldKeyOnInsert));
  add('dedupe.holder', '', (d) => one(d.dedupe.holder(spec)));
  for (const keyCount of ROW_COUNTS) {
    add('dedupe.heldKeys', `${keyCount} ${keyCount === 1 ? 'key' : 'keys'}`, (d) => one(d.dedupe.heldKeys(spec, keyCount)), { binding: 'rows' });
  }
  add('dedupe.releaseFromWork', '', (d) => one(d.dedupe.releaseFromWork(spec)), lease);
  add('dedupe.replaceWaiting', '', (d) => one(d.dedupe.replaceWaiting(spec, published)), { ...lease, binding: 'order' });
  add('dedupe.uniqueIndexes', '', (d) => one(d.dedupe.uniqueIndexes?.(spec)));

  add('schema.probeColumns', '', (d) => one(d.schema.probeColumns(spec)));
  add('schema.createTable', '', (d) => ddl(d.schema.createTable(spec)));
  add('schema.textCollation.read', '', (d) => one(d.schema.textCollation?.read(spec)));
  const fixedColumn = { name: spec.id.column, type: 'varchar(64)', isNullable: false };
  add('schema.textCollation.renderFix', '', (d) => ddl(d.schema.textCollation === undefined ? undefined : [d.schema.textCollation.renderFix(spec, fixedColumn)]));
  add('schema.indexes.read', '', (d) => one(d.schema.indexes?.read(spec)));
  add('schema.indexes.renderInWorkIndex', '', (d) => ddl(d.schema.indexes === undefined ? undefined : [d.schema.indexes.renderInWorkIndex(spec)]), lease);

  const notify = { needs: 'supportsListenNotify' } as const;
  add('notify.channel', '', (d) => text('channel', d.notify?.channel(spec)), notify);
  add('notify.listen', '', (d) => one(d.notify?.listen(spec)), notify);
  add('notify.listenTo', '', (d) => one(d.notify?.listenTo('tablequeue_queue_controls')), notify);
  add('notify.notify', '', (d) => one(d.notify?.notify()), notify);
  return renderings;
}

/** The groups of statements of a `Dialect`, each an object of methods. */
export const DIALECT_GROUPS = Object.freeze(['session', 'rowLock', 'lease', 'fifo', 'advisory', 'settle', 'insert', 'dedupe', 'schema', 'notify'] as const);

export type DialectGroup = (typeof DIALECT_GROUPS)[number];

/**
 * The methods of a `Dialect` the catalogue renders, by path: what a dialect must have (a
 * service's own is checked for each at `new Broker`), the optional ones marked.
 */
export const DIALECT_MEMBERS: readonly { readonly path: string; readonly optional: boolean }[] = Object.freeze(
  [
    'session.begin',
    'session.commit',
    'session.rollback',
    'session.savepoint',
    'session.rollbackToSavepoint',
    'session.serverVersion',
    'rowLock.claim',
    'rowLock.retry',
    'rowLock.retryAfter',
    'rowLock.finishMany?',
    'lease.claim',
    'lease.release',
    'lease.retryAfter',
    'lease.extend',
    'lease.confirm',
    'lease.settleMany',
    'fifo.guard',
    'advisory.candidates',
    'advisory.lock',
    'advisory.unlock',
    'advisory.take',
    'advisory.retryAfter',
    'advisory.keyOf',
    'advisory.slotKeys',
    'settle.finish',
    'settle.deadLetter',
    'insert.rows',
    'dedupe.holder',
    'dedupe.heldKeys',
    'dedupe.releaseFromWork',
    'dedupe.replaceWaiting',
    'dedupe.uniqueIndexes?',
    'schema.probeColumns',
    'schema.createTable',
    'schema.textCollation.read?',
    'schema.textCollation.ignoredBy?',
    'schema.textCollation.renderFix?',
    'schema.indexes.read?',
    'schema.indexes.renderInWorkIndex?',
    'notify.channel?',
    'notify.listen?',
    'notify.listenTo?',
    'notify.notify?',
    'validateTable',
    'checkServerVersion',
  ].map((entry) => Object.freeze({ path: entry.replace(/\?$/, ''), optional: entry.endsWith('?') })),
);

/** A dead letter's destination as a subscription of this table would have it. */
function deadLetterTargetOf(spec: TableSpec): DeadLetterTarget {
  return spec.group === undefined
    ? { kind: 'table', schema: spec.schema, name: `${spec.name}_dead` }
    : { kind: 'group', group: 'dead' };
}

/** The role columns a publish writes (the publisher's order). */
function publishedColumns(spec: TableSpec): string[] {
  const roles = [spec.group?.column, spec.priority, spec.partitionKey, spec.retryAfter, spec.headers, spec.payload, spec.dedupeKey];
  return [...(spec.id.generated ? [] : [spec.id.column]), ...roles.filter((column): column is string => column !== undefined)];
}

/** Due as a delay only on a database-clock table with a retryAfter column; held keys skipped only where inserts skip them. */
function insertRows(
  dialect: Dialect,
  spec: TableSpec,
  columns: readonly string[],
  rowCount: number,
  options: { retryAfterAsDelay?: boolean; skipHeldKeys?: boolean },
): Statement | undefined {
  if (options.retryAfterAsDelay === true && (spec.clock !== 'database' || spec.retryAfter === undefined)) return undefined;
  if (options.skipHeldKeys === true && (spec.dedupeKey === undefined || dialect.dedupe.heldKeyOnInsert !== 'skipped')) return undefined;
  return dialect.insert.rows(spec, columns, rowCount, options);
}

function rowsVariant(rowCount: number): string {
  return `${rowCount} ${rowCount === 1 ? 'row' : 'rows'}`;
}

function one(statement: Statement | undefined): Rendered {
  return statement === undefined ? { shape: 'none', parts: [] } : { shape: 'statement', parts: [{ part: 'statement', kind: 'statement', statement }] };
}

function statements(label: string, list: readonly Statement[]): Rendered {
  return {
    shape: `${list.length} ${list.length === 1 ? 'statement' : 'statements'}`,
    parts: list.map((statement, index) => ({ part: `${label}[${index}]`, kind: 'statement', statement })),
  };
}

function ddl(texts: readonly string[] | undefined): Rendered {
  if (texts === undefined) return { shape: 'none', parts: [] };
  return {
    shape: `${texts.length} ${texts.length === 1 ? 'statement' : 'statements'}`,
    parts: texts.map((sql, index) => ({ part: `[${index}]`, kind: 'ddl', statement: { name: 'schema', sql, params: [] } })),
  };
}

function text(part: string, sql: string | undefined): Rendered {
  return sql === undefined ? { shape: 'none', parts: [] } : { shape: 'text', parts: [{ part, kind: 'text', statement: { name: part, sql, params: [] } }] };
}

function value(found: string | number | undefined): Rendered {
  return { shape: found === undefined ? 'none' : String(found), parts: [] };
}

function leaseClaim(claim: LeaseClaim): Rendered {
  if (claim.kind === 'single') {
    const parts: RenderedPart[] = [{ part: 'statement', kind: 'statement', statement: claim.statement }];
    if (claim.guarded !== undefined) {
      parts.push(...statements('guarded.begin', claim.guarded.begin).parts);
      parts.push({ part: 'guarded.guard', kind: 'statement', statement: claim.guarded.guard });
    }
    return { shape: claim.guarded === undefined ? 'single' : 'single guarded', parts };
  }
  const parts: RenderedPart[] = [...statements('begin', claim.begin).parts];
  if (claim.guard !== undefined) parts.push({ part: 'guard', kind: 'statement', statement: claim.guard });
  parts.push({ part: 'select', kind: 'statement', statement: claim.select });
  parts.push({ part: 'stamp', kind: 'statement', statement: claim.stamp });
  for (const rowCount of ROW_COUNTS) {
    if (claim.stampAll !== undefined) parts.push({ part: `stampAll(${rowCount})`, kind: 'statement', statement: claim.stampAll(rowCount) });
  }
  const shape = ['selectThenStamp', claim.guard === undefined ? '' : 'guard', claim.stampAll === undefined ? '' : 'stampAll'];
  return { shape: shape.filter((word) => word !== '').join(' '), parts };
}

function settleMany(settle: LeaseSettleMany | undefined): Rendered {
  if (settle === undefined) return { shape: 'none', parts: [] };
  const shape = `${settle.kind} ${settle.rowParams}`;
  if (settle.kind === 'returning') return { shape, parts: one(settle.statement).parts };
  return {
    shape,
    parts: [
      ...statements('begin', settle.begin).parts,
      { part: 'lock', kind: 'statement', statement: settle.lock },
      { part: 'write', kind: 'statement', statement: settle.write },
    ],
  };
}

function advisoryTake(take: AdvisoryTake): Rendered {
  if (take.kind === 'single') return { shape: 'single', parts: one(take.statement).parts };
  return {
    shape: 'countThenRead',
    parts: [
      { part: 'count', kind: 'statement', statement: take.count },
      { part: 'read', kind: 'statement', statement: take.read },
    ],
  };
}
