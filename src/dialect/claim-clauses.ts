import { DeclarationError, UnsupportedError } from '../errors.js';
import type { ClaimFormName, TableSpec } from '../table/table-spec.js';
import { nowOf } from './database-clock.js';
import type { LeaseClaimOptions, TableColumns } from './dialect.js';
import { identifier, joinSql, param, qualifiedName, sql, type SqlText } from './quoting.js';
import { RATE_KEY_USE_COLUMNS, rateKeyUsesTableOf } from './rate-limit-statements.js';
import { sideTableName } from './side-table.js';

/** The queue table, schema-qualified when declared so. */
export function tableOf(spec: TableSpec): SqlText {
  return qualifiedName(spec.schema, spec.name);
}

/**
 * `dedupe_key = NULL` where the table has the role, for every settlement that keeps the row
 * (processedAt marks, dead letters into a group): a finished or dead row never holds its key, so a
 * dead letter never blocks a new message with the same key.
 */
export function keyFreed(spec: TableSpec): SqlText[] {
  return spec.dedupeKey === undefined ? [] : [sql`${identifier(spec.dedupeKey)} = NULL`];
}

/** The explicit column list of whole-row statements: never `*`, so a copy names what it moves. */
export function columnList(columns: TableColumns): SqlText {
  if (columns.length === 0) {
    throw new TypeError('a whole-row statement needs the table columns found when the subscription opened');
  }
  return joinSql(columns.map(identifier), ', ');
}

/**
 * What makes a row claimable, one condition per role the table has: its group, due
 * (`retry_after <= now`, the database's own now on a database-clock table), unfinished, and in
 * the lease form not leased by a live holder.
 */
export function claimConditions(spec: TableSpec, form: ClaimFormName): SqlText[] {
  const conditions: SqlText[] = [];
  if (spec.group !== undefined) conditions.push(sql`${identifier(spec.group.column)} = ${param('group')}`);
  if (spec.retryAfter !== undefined) conditions.push(sql`${identifier(spec.retryAfter)} <= ${nowOf(spec)}`);
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  if (form === 'lease') conditions.push(leaseIsFree(spec));
  return conditions;
}

/** Never leased, or its lease expired by `leaseNow`. */
export function leaseIsFree(spec: TableSpec): SqlText {
  const lockedUntil = identifier(requireLeaseColumn(spec));
  return sql`(${lockedUntil} IS NULL OR ${lockedUntil} <= ${param('leaseNow')})`;
}

/** ` WHERE a AND b`, or nothing for a table with no claim condition. */
export function whereAll(conditions: readonly SqlText[]): SqlText {
  return conditions.length === 0 ? sql`` : sql` WHERE ${joinSql(conditions, ' AND ')}`;
}

/**
 * The rows a row lock or MySQL lease claim takes: claimable, in claim order, skipping rows another
 * claim holds. The lock lasts until the transaction ends. On a FIFO table only the group's head,
 * so a head another claim holds yields nothing rather than the row behind it.
 */
export function skipLockedSelect(
  spec: TableSpec,
  columns: TableColumns,
  form: Exclude<ClaimFormName, 'advisory'>,
  options: LeaseClaimOptions & { readonly slotKey?: SlotKey } = {},
): SqlText {
  const from = sql`SELECT ${columnList(columns)} FROM ${tableOf(spec)}`;
  if (isFifo(spec)) return sql`${from}${whereAll(fifoHeadConditions(spec, form))} FOR UPDATE SKIP LOCKED`;
  const conditions = [...claimConditions(spec, form), ...perKeyConditions(spec, options), ...rateKeyConditions(spec, options)];
  if (options.slotKey !== undefined) conditions.push(slotKeyCondition(spec, options.slotKey));
  const where = whereAll(conditions);
  return sql`${from}${where} ORDER BY ${claimOrder(spec)} LIMIT ${param('limit')} FOR UPDATE SKIP LOCKED`;
}

/**
 * MySQL, MariaDB: whether a row lock claim's locking read would pass over rows it cannot take. In
 * a claim order with the priority before the due time, a delayed row of a smaller priority lies
 * ahead of the due ones in the claim index, and InnoDB keeps the lock it took on that row's index
 * entry after refusing the row, even at read committed (measured on MariaDB 10.11): until the
 * claim's handler ended, a cancel of that delayed row waited for it, as would anything else that
 * changes its index entry.
 * Without a priority the index range ends at the first row not yet due, which is never locked.
 */
export function passesRowsItCannotTake(spec: TableSpec): boolean {
  return spec.priority !== undefined && spec.retryAfter !== undefined && !isFifo(spec);
}

/**
 * MySQL, MariaDB: the row lock claim for a table that `passesRowsItCannotTake`. The first
 * `:candidates` claimable ids are read without locks (a derived table is a query block of its
 * own, which the locking clause does not reach), and only they are then locked, by primary key
 * in that order (STRAIGHT_JOIN keeps the candidates first), skipping those another claim holds,
 * until `:limit` are taken. Rows in work stay claimable by their columns, so the candidates
 * include them: `:candidates` must reach past the rows in work ahead of the free ones.
 */
export function candidatesThenLockSelect(spec: TableSpec, columns: TableColumns): SqlText {
  const conditions = whereAll(claimConditions(spec, 'rowLock'));
  const id = identifier(spec.id.column);
  const candidates = sql`SELECT ${id} AS tablequeue_candidate FROM ${tableOf(spec)}${conditions} ORDER BY ${claimOrder(spec)} LIMIT ${param('candidates')}`;
  return sql`SELECT ${columnList(columns)} FROM (${candidates}) AS tablequeue_candidates STRAIGHT_JOIN ${tableOf(spec)} ON ${id} = tablequeue_candidates.tablequeue_candidate${conditions} LIMIT ${param('limit')} FOR UPDATE SKIP LOCKED`;
}

/**
 * The rows of the queue in work across every claimer: a live lease (`leaseNow`), unfinished, in
 * the group. What `concurrency` counts against its limits.
 */
export function rowsInWork(spec: TableSpec): SqlText[] {
  const conditions: SqlText[] = [];
  if (spec.group !== undefined) conditions.push(sql`${identifier(spec.group.column)} = ${param('group')}`);
  conditions.push(sql`${identifier(requireLeaseColumn(spec))} > ${param('leaseNow')}`);
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  return conditions;
}

/**
 * `concurrency.perKey` (lease form): a row with a partition key is claimable only while its key's
 * rows in work, plus the claimable rows of the key ahead of it in claim order, stay under
 * `:perKey`, so one claim never takes more rows of a key than the key has room for. Both are read
 * once per statement (uncorrelated): a rank over the first `:window` claimable rows with a key
 * (`rankedByKey`), joined to a count per key of the live leases; only rows ranked are claimable.
 * A row without a key counts toward no key. Only sound behind the concurrency guard, which keeps
 * a second claim from reading the same room.
 */
export function perKeyConditions(spec: TableSpec, options: LeaseClaimOptions): SqlText[] {
  if (options.perKey !== true) return [];
  const key = identifier(requirePartitionKey(spec, 'a perKey claim'));
  const id = identifier(spec.id.column);
  const hasKey = sql`${key} IS NOT NULL`;
  const ranked = rankedByKey(spec);
  const held = sql`SELECT ${key}, COUNT(*) AS tablequeue_count FROM ${tableOf(spec)}${whereAll([...rowsInWork(spec), hasKey])} GROUP BY ${key}`;
  const room = sql`tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_held.tablequeue_count, 0) <= ${param('perKey')}`;
  const join = sql`(${ranked}) AS tablequeue_ranked LEFT JOIN (${held}) AS tablequeue_held ON tablequeue_held.${key} = tablequeue_ranked.${key}`;
  return [sql`(${key} IS NULL OR ${id} IN (SELECT tablequeue_ranked.${id} FROM ${join} WHERE ${room}))`];
}

/**
 * `concurrency.perKey` (row lock form): the rows of `:key`, whose slot row the claim holds, or
 * the rows without a key, which count toward none. Kept apart: a slot spent on a row without a
 * key holds back its key's rows while that row's handler runs.
 */
export type SlotKey = 'ofKey' | 'withoutKey';

export function slotKeyCondition(spec: TableSpec, slotKey: SlotKey): SqlText {
  const key = identifier(requirePartitionKey(spec, 'a claim under a key slot'));
  return slotKey === 'ofKey' ? sql`${key} = ${param('key')}` : sql`${key} IS NULL`;
}

/**
 * `rate: { key: true }` (lease form): a row with a partition key is claimable only while the rows
 * of its key taken within the window (summed from the rate's uses table), plus the claimable rows
 * of the key ahead of it in claim order, stay within `:rateLimit`; the same rank and join as
 * `perKeyConditions`, counting uses instead of leases. A row without a key is not limited, as it
 * counts toward no key in perKey. Only sound behind the rate guard.
 */
export function rateKeyConditions(spec: TableSpec, options: LeaseClaimOptions): SqlText[] {
  if (options.rateByKey === undefined) return [];
  const key = identifier(requirePartitionKey(spec, 'a rate per key'));
  const u = RATE_KEY_USE_COLUMNS;
  const uses = sideTableName(rateKeyUsesTableOf(options.rateByKey));
  const queue = sql`${identifier(u.queueTable)} = ${param(`column:${u.queueTable}`)} AND ${identifier(u.queueName)} = ${param(`column:${u.queueName}`)}`;
  const used = sql`SELECT ${identifier(u.rateKey)}, SUM(${identifier(u.uses)}) AS tablequeue_count FROM ${uses} WHERE ${queue} AND ${identifier(u.usedAtMs)} > ${param('rateFreeSince')} GROUP BY ${identifier(u.rateKey)}`;
  const room = sql`tablequeue_ranked.tablequeue_rank + COALESCE(tablequeue_used.tablequeue_count, 0) <= ${param('rateLimit')}`;
  const join = sql`(${rankedByKey(spec)}) AS tablequeue_ranked LEFT JOIN (${used}) AS tablequeue_used ON tablequeue_used.${identifier(u.rateKey)} = tablequeue_ranked.${key}`;
  return [sql`(${key} IS NULL OR ${identifier(spec.id.column)} IN (SELECT tablequeue_ranked.${identifier(spec.id.column)} FROM ${join} WHERE ${room}))`];
}

/**
 * The first `:window` claimable rows that have a key, in claim order, each with its place among
 * its key's rows: ranked in a derived table read through the claim order index, so a claim costs
 * the window, not the backlog (ranking every claimable row sorted 1,000,000 of them on disk for
 * 1.76 s a claim on PostgreSQL).
 */
function rankedByKey(spec: TableSpec): SqlText {
  const keyColumn = requirePartitionKey(spec, 'a per-key claim');
  const key = identifier(keyColumn);
  const columns = [...new Set([spec.id.column, keyColumn, ...claimOrderColumns(spec)])].map(identifier);
  const window = sql`SELECT ${joinSql(columns, ', ')} FROM ${tableOf(spec)}${whereAll([...claimConditions(spec, 'lease'), sql`${key} IS NOT NULL`])} ORDER BY ${claimOrder(spec)} LIMIT ${param('window')}`;
  const rank = sql`ROW_NUMBER() OVER (PARTITION BY ${key} ORDER BY ${claimOrder(spec)})`;
  return sql`SELECT ${identifier(spec.id.column)}, ${key}, ${rank} AS tablequeue_rank FROM (${window}) AS tablequeue_window`;
}

export function requirePartitionKey(spec: TableSpec, what: string): string {
  if (spec.partitionKey === undefined) {
    throw new TypeError(`table "${spec.qualifiedName}" has no partitionKey column; ${what} is rendered for keyed tables only`);
  }
  return spec.partitionKey;
}

/** FIFO groups (WP-11): the table declares `group: { column, fifo: true }`. */
export function isFifo(spec: TableSpec): boolean {
  return spec.group?.fifo === true;
}

/**
 * What makes a FIFO group's head claimable (WP-11): the row is the head (the group's first
 * unfinished row in claim order, due or not, held or not) and it is claimable; in the lease form
 * no row of the group may be in work either. That matters when the row in work is no longer the
 * head: a row published with a smaller priority while another runs becomes the head, and waits.
 * At most one row matches, whatever the claim's limit.
 *
 * The claimable conditions are repeated outside the head lookup because a row lock re-reads
 * only the locked row: when the head was settled (finished, delayed, moved to another group)
 * after the lookup read it, Postgres re-checks these conditions on the row as settled, while
 * the head lookup keeps its first answer.
 */
export function fifoHeadConditions(spec: TableSpec, form: Exclude<ClaimFormName, 'advisory'>): SqlText[] {
  const conditions = [sql`${identifier(spec.id.column)} = (${fifoHeadId(spec)})`, ...claimConditions(spec, form)];
  if (form === 'lease') conditions.push(noRowOfGroupInWork(spec));
  return conditions;
}

/** The group's unfinished rows: all of them on a table that deletes finished rows. */
export function unfinishedRowsOfGroup(spec: TableSpec): SqlText[] {
  const conditions = [sql`${identifier(fifoGroupColumn(spec))} = ${param('group')}`];
  if (spec.processedAt !== undefined) conditions.push(sql`${identifier(spec.processedAt)} IS NULL`);
  return conditions;
}

function fifoHeadId(spec: TableSpec): SqlText {
  const where = whereAll(unfinishedRowsOfGroup(spec));
  return sql`SELECT ${identifier(spec.id.column)} FROM ${tableOf(spec)}${where} ORDER BY ${claimOrder(spec)} LIMIT 1`;
}

/**
 * No row of the group holds a live lease; the alias keeps its columns apart from the claimed row's.
 * Asked as "the group's latest live lease is none" so that the in-work index (`inWorkIndex`:
 * group, lease) answers it from the top of the group's live leases in every plan. Measured on
 * PostgreSQL with 1,000,000 rows in one FIFO group and none in work: without that index the check
 * read the whole table, 148 ms per claim; with it, a `NOT EXISTS` used the index in the plan for
 * the values but not in the generic plan (it guessed a third of the rows live and a sequential
 * scan that stops at the first), while the maximum, which has no early stop to guess at, reads the
 * index's 2 pages in both (0.1 ms).
 */
export function noRowOfGroupInWork(spec: TableSpec): SqlText {
  const group = sql`tablequeue_work.${identifier(fifoGroupColumn(spec))}`;
  const lockedUntil = sql`tablequeue_work.${identifier(requireLeaseColumn(spec))}`;
  return sql`(SELECT MAX(${lockedUntil}) FROM ${tableOf(spec)} AS tablequeue_work WHERE ${group} = ${param('group')} AND ${lockedUntil} > ${param('leaseNow')}) IS NULL`;
}

function fifoGroupColumn(spec: TableSpec): string {
  if (spec.group?.fifo !== true) {
    throw new TypeError(`table "${spec.qualifiedName}" has no FIFO group; FIFO statements are rendered for FIFO tables only`);
  }
  return spec.group.column;
}

/** Smaller priority first, then the earliest due, then insertion order; id always last. */
/** `attempt = attempt + 1`: a claim counts the attempt it starts. */
export function countAttempt(column: string): SqlText {
  return sql`${identifier(column)} = ${identifier(column)} + 1`;
}

export function claimOrder(spec: TableSpec): SqlText {
  return joinSql(claimOrderColumns(spec).map(identifier), ', ');
}

function claimOrderColumns(spec: TableSpec): string[] {
  return [spec.priority, spec.retryAfter, spec.id.column].filter((column) => column !== undefined);
}

/**
 * Claims that cannot read the database clock. The row lock form reads it wherever a statement
 * needs now (`nowOf`, `dueAtOf`). A lease token is an expiry the host computes and then names in
 * every settlement, so the lease form keeps the host clock (defineTable refuses the pair too).
 * The advisory form does not read it yet: rendering its host-clock statements for such a table
 * would silently change the timing the table declared, so it is refused instead.
 */
export function refuseUnbuiltClaims(spec: TableSpec, database: string): void {
  if (spec.clock !== 'database' || spec.form !== 'lease') return;
  const reason = 'the lease form computes its tokens on the host, so it cannot use the database clock';
  throw new UnsupportedError({
    database,
    feature: 'database clock',
    message: `table "${spec.qualifiedName}" declares clock: "database"; ${reason}, use clock: "host"`,
  });
}

/** The lease column, which every lease statement and fenced settlement names. */
export function requireLeaseColumn(spec: TableSpec): string {
  if (spec.lockedUntil === undefined) {
    throw new DeclarationError(
      `table "${spec.qualifiedName}" has no lockedUntil column; lease statements and fenced settlements need one`,
    );
  }
  return spec.lockedUntil;
}

/** `id = :id`, and with a fence `AND locked_until = :held`: the row, only while we hold it. */
export function rowFilter(spec: TableSpec, options: { fenced: boolean }): SqlText {
  const byId = sql`${identifier(spec.id.column)} = ${param('id')}`;
  if (!options.fenced) return byId;
  return sql`${byId} AND ${identifier(requireLeaseColumn(spec))} = ${param('held')}`;
}
