import { describe, expect, it } from 'vitest';
import { KEY_WINDOW_ROWS } from '../../src/claim/key-window.js';
import { createConcurrencyStatements } from '../../src/dialect/concurrency-statements.js';
import { createDialect } from '../../src/dialect/create-dialect.js';
import type { Connection } from '../../src/driver/driver.js';
import { defineTable, type QueueTable } from '../../src/index.js';
import { bindStatement, type BoundStatement, type ParamValues, type Statement } from '../../src/statement.js';
import { roleColumns } from '../../src/table/table-spec.js';
import { createTable, jobsDeclaration, jobsTable, type FormUnderTest } from '../fixtures.js';
import type { SuiteContext } from '../run-conformance.js';

/**
 * The size at which a claim that lost its index shows: a sequential scan reads every page of the
 * table for each claim, where the claim index reads a few. Filled server-side in about a second.
 */
const DUE_ROWS = 100_000;
/** One table holding many queues, each claim naming one of them. */
const SHARED_QUEUES = 1_000;
/** The keys of a perKey table's rows, each with two slots. */
const KEYS = 1_000;
/** One claim at a time, and a batch as large as the growth benchmark's. */
const CLAIM_LIMITS = [1, 100];
const LEASE_MS = 30_000;
const TABLE = 'jobs';
const CLAIM_INDEX = `${TABLE}_claim_order`;
const PRIMARY_KEY = `${TABLE}_pkey`;
const IN_WORK_INDEX = `${TABLE}_in_work`;
/** The claim statement kept by the session for the generic plan, as the driver keeps its own. */
const PREPARED_CLAIM = 'tablequeue_plan_claim';

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Relation Name'?: string;
  readonly 'Index Name'?: string;
  readonly 'Subplan Name'?: string;
  /** The planner's estimate of the rows the node yields. */
  readonly 'Plan Rows'?: number;
  readonly Plans?: readonly PlanNode[];
}

interface PlanCase {
  readonly title: string;
  readonly form: FormUnderTest;
  /** The queue the claim names. */
  readonly queue: string;
  /** INSERT … SELECT over generate_series, run before ANALYZE. */
  readonly fill: readonly string[];
  /** A table of FIFO groups (WP-11), whose claim takes the group's head alone. */
  readonly fifo?: boolean;
}

const PAYLOAD = `'\\x7b7d'::bytea`;

/** `rows` rows of `queueOf(n)`, due before now by n milliseconds, or after it when `delayed`. */
function fillSql(rows: number, queueOf: string, options: { delayed?: boolean } = {}): string {
  const due = options.delayed === true ? `now() + interval '1 hour' + n * interval '1 millisecond'` : `now() - n * interval '1 millisecond'`;
  return `INSERT INTO ${TABLE} (queue, retry_after, payload) SELECT ${queueOf}, ${due}, ${PAYLOAD} FROM generate_series(1, ${rows}) AS n`;
}

const PLAN_CASES: readonly PlanCase[] = [
  { title: 'a row lock table', form: 'rowLock', queue: 'emails', fill: [fillSql(DUE_ROWS, `'emails'`)] },
  { title: 'a lease table', form: 'lease', queue: 'emails', fill: [fillSql(DUE_ROWS, `'emails'`)] },
  {
    title: `a lease table that ${SHARED_QUEUES.toLocaleString('en-US')} queues share`,
    form: 'lease',
    queue: 'queue-500',
    fill: [fillSql(DUE_ROWS, `'queue-' || (n % ${SHARED_QUEUES})`)],
  },
  {
    title: 'a lease table with as many rows delayed into the future as due',
    form: 'lease',
    queue: 'emails',
    fill: [fillSql(DUE_ROWS, `'emails'`), fillSql(DUE_ROWS, `'emails'`, { delayed: true })],
  },
  { title: 'a FIFO row lock table with every row in one group', form: 'rowLock', queue: 'emails', fill: [fillSql(DUE_ROWS, `'emails'`)], fifo: true },
  { title: 'a FIFO lease table with every row in one group', form: 'lease', queue: 'emails', fill: [fillSql(DUE_ROWS, `'emails'`)], fifo: true },
];

/**
 * PostgreSQL's plans of the claim statements, as the dialect renders them and the driver binds
 * them, over 100,000 rows after ANALYZE: the claim reads the table through its claim index, never
 * a sequential scan. A claim planned as a sequential scan still returns the right rows, so only
 * its plan tells; the planner picks by statistics, so only a table of this size tells. Both the
 * plan for the bound values and the generic plan are read: the driver runs each statement as a
 * named prepared statement, which PostgreSQL may switch to its generic plan after five runs.
 * Plans are read with EXPLAIN without ANALYZE, so no claim runs and there is nothing to roll back.
 * Registered for the postgres stand alone: the plans are PostgreSQL's EXPLAIN output.
 */
export function claimPlansSuite(context: SuiteContext): void {
  describe('claim plans at 100,000 rows', () => {
    for (const planCase of PLAN_CASES) {
      it(`${planCase.title}: the claim scans the claim index, in the plan for its values and in the generic plan`, async () => {
        const table = planCase.fifo === true ? fifoJobsTable(planCase.form) : jobsTable({ form: planCase.form });
        await createTable(context.stand, context.db, table);
        for (const fill of planCase.fill) await context.db.exec(fill);
        await context.db.exec(`ANALYZE ${TABLE}`);

        const claim = claimStatement(table, planCase.form);
        const driver = await context.db.openDriver({ poolSize: 1 });
        const connection = await driver.acquire();
        try {
          for (const limit of CLAIM_LIMITS) {
            const bound = bindStatement(claim, claimValues(planCase, limit));
            const plan = await explain(connection, { name: 'plan.explain', sql: `EXPLAIN (FORMAT JSON) ${bound.sql}`, values: bound.values });
            expectPlan(planCase, plan, limit, `limit ${limit}, plan for the values`);
          }
          const generic = await explainGeneric(connection, bindStatement(claim, claimValues(planCase, 1)));
          expectPlan(planCase, generic, undefined, 'generic plan');
        } finally {
          connection.release();
        }
      });
    }

    it('a lease table made with inWorkIndex, under concurrency limits: the count of rows in work reads the in-work index, and the perKey claim reads no table whole', async () => {
      const table = defineTable({ ...jobsDeclaration({ form: 'lease' }), partitionKey: 'customer' });
      await createTable(context.stand, context.db, table, { inWorkIndex: true });
      await context.db.exec(
        `INSERT INTO ${TABLE} (queue, customer, retry_after, payload) SELECT 'emails', 'k' || (n % 40), now() - n * interval '1 millisecond', ${PAYLOAD} FROM generate_series(1, ${DUE_ROWS}) AS n`,
      );
      await context.db.exec(`UPDATE ${TABLE} SET locked_until = now() + interval '1 hour' WHERE id <= 20`);
      await context.db.exec(`ANALYZE ${TABLE}`);
      const dialect = createDialect('postgres');
      const inWork = createConcurrencyStatements('postgres').inWork(table.spec);
      const perKeyClaim = dialect.lease.claim(table.spec, roleColumns(table.spec), { perKey: true });
      if (perKeyClaim.kind !== 'single') throw new Error(`expected PostgreSQL's lease claim to be one statement, got ${perKeyClaim.kind}`);
      const now = new Date();
      const values = { group: 'emails', now, leaseNow: now, limit: 8, perKey: 2, window: KEY_WINDOW_ROWS, lockedUntil: new Date(now.getTime() + LEASE_MS) };
      const driver = await context.db.openDriver({ poolSize: 1 });
      const connection = await driver.acquire();
      try {
        for (const [statement, which] of [[inWork, 'the count of rows in work'], [perKeyClaim.statement, 'the perKey claim']] as const) {
          const bound = bindStatement(statement, values);
          const plans = [
            await explain(connection, { name: 'plan.explain', sql: `EXPLAIN (FORMAT JSON) ${bound.sql}`, values: bound.values }),
            await explainGeneric(connection, bound),
          ];
          for (const plan of plans) {
            const shown = `${which}:\n${JSON.stringify(plan, undefined, 2)}`;
            const scans = scanNodesOf(plan);
            expect(scans.filter((node) => node['Node Type'] === 'Seq Scan').map(describeScan), shown).toEqual([]);
            expect(scans.some((node) => node['Index Name'] === IN_WORK_INDEX), shown).toBe(true);
          }
        }
      } finally {
        connection.release();
      }
    });

    it('a row lock table under perKey: neither statement of the take joins, before ANALYZE too (one that joined the slots to the heads compared every slot with every key), and the keys\' heads read the claim index', async () => {
      const table = defineTable({ ...jobsDeclaration({ form: 'rowLock' }), partitionKey: 'customer' });
      await createTable(context.stand, context.db, table);
      const keySlots = createConcurrencyStatements('postgres').keySlots!;
      await context.db.exec(keySlots.createTable(table.spec));
      await context.db.exec(
        `INSERT INTO ${TABLE} (queue, customer, retry_after, payload) SELECT 'emails', 'k' || (n % ${KEYS}), now() - n * interval '1 millisecond', ${PAYLOAD} FROM generate_series(1, ${DUE_ROWS}) AS n`,
      );
      await context.db.exec(
        `INSERT INTO tablequeue_concurrency_key_slots SELECT '${TABLE}', 'emails', 'k' || n, slot FROM generate_series(0, ${KEYS - 1}) AS n, generate_series(1, 2) AS slot`,
      );
      const take = keySlots.take(table.spec);
      if (take.kind !== 'claimOrder') throw new Error(`expected PostgreSQL's key slot take in claim order, got ${take.kind}`);
      const values = {
        group: 'emails',
        now: new Date(),
        ids: ['1', '2', '3'],
        passedKeys: ['k4'],
        window: KEY_WINDOW_ROWS,
        limit: 8,
        offset: 0,
        keys: Array.from({ length: 16 }, (_, index) => `k${index}`),
        perKey: 2,
      };
      const driver = await context.db.openDriver({ poolSize: 1 });
      const connection = await driver.acquire();
      const plansOf = async (statement: Statement) => {
        const bound = bindStatement(statement, values);
        return [
          await explain(connection, { name: 'plan.explain', sql: `EXPLAIN (FORMAT JSON) ${bound.sql}`, values: bound.values }),
          await explainGeneric(connection, bound),
        ];
      };
      try {
        // Without statistics the planner may read the queue's due rows by a bitmap of the claim
        // index and sort them, until autovacuum analyzes the table; it never joins.
        for (const [statement, which] of [[take.heads, 'the heads'], [take.lock, 'the lock']] as const) {
          for (const plan of await plansOf(statement)) {
            const shown = `${which}, before ANALYZE:\n${JSON.stringify(plan, undefined, 2)}`;
            expect(nodesOf(plan, (node) => ['Nested Loop', 'Hash Join', 'Merge Join'].includes(node['Node Type'])).map(describeScan), shown).toEqual([]);
            expect(scanNodesOf(plan).filter((node) => node['Node Type'] === 'Seq Scan').map(describeScan), shown).toEqual([]);
          }
        }
        await context.db.exec(`ANALYZE ${TABLE}`);
        await context.db.exec('ANALYZE tablequeue_concurrency_key_slots');
        for (const plan of await plansOf(take.heads)) {
          expect(scanNodesOf(plan).map(describeScan), `the heads:\n${JSON.stringify(plan, undefined, 2)}`).toEqual([`Index Scan using ${CLAIM_INDEX}`]);
        }
      } finally {
        connection.release();
      }
    });
  });
}

/** Every node of the plan that `isWanted`. */
function nodesOf(node: PlanNode, isWanted: (node: PlanNode) => boolean): PlanNode[] {
  return [...(isWanted(node) ? [node] : []), ...(node.Plans ?? []).flatMap((child) => nodesOf(child, isWanted))];
}

function fifoJobsTable(form: FormUnderTest): QueueTable {
  return defineTable({ ...jobsDeclaration({ form }), group: { column: 'queue', fifo: true } });
}

function expectPlan(planCase: PlanCase, plan: PlanNode, limit: number | undefined, which: string): void {
  if (planCase.fifo === true) expectFifoClaimOnIndexes(plan, planCase.form, which);
  else expectClaimOnIndex(plan, planCase.form, limit, which);
}

function claimStatement(table: QueueTable, form: FormUnderTest): Statement {
  const dialect = createDialect('postgres');
  const columns = roleColumns(table.spec);
  if (form === 'rowLock') return dialect.rowLock.claim(table.spec, columns);
  const claim = dialect.lease.claim(table.spec, columns);
  if (claim.kind !== 'single') throw new Error(`expected PostgreSQL's lease claim to be one statement, got ${claim.kind}`);
  return claim.statement;
}

/** What the claim forms bind: the claim's instant, and in the lease form the lease it writes. */
function claimValues(planCase: PlanCase, limit: number): ParamValues {
  const now = new Date();
  if (planCase.form === 'rowLock') return { group: planCase.queue, now, limit };
  return { group: planCase.queue, now, leaseNow: now, limit, lockedUntil: new Date(now.getTime() + LEASE_MS) };
}

async function explain(connection: Connection, statement: BoundStatement): Promise<PlanNode> {
  const { rows } = await connection.execute(statement);
  const cell = Object.values(rows[0] ?? {})[0];
  const [explained] = (typeof cell === 'string' ? JSON.parse(cell) : cell) as [{ Plan: PlanNode }];
  return explained.Plan;
}

/**
 * The plan PostgreSQL caches for every run of the prepared claim, whatever its values: prepared
 * as the driver prepares it (parameter types inferred from their context), explained under
 * `force_generic_plan`. EXECUTE takes its arguments as literals: parameters of the explaining
 * statement would have no type to infer there, and a generic plan does not look at them.
 */
async function explainGeneric(connection: Connection, claim: BoundStatement): Promise<PlanNode> {
  const run = (sql: string) => connection.execute({ name: 'plan.generic', sql, values: [] });
  await run('SET plan_cache_mode = force_generic_plan');
  await run(`PREPARE ${PREPARED_CLAIM} AS ${claim.sql}`);
  try {
    const values = claim.values.map(sqlLiteral).join(', ');
    return await explain(connection, { name: 'plan.generic', sql: `EXPLAIN (FORMAT JSON) EXECUTE ${PREPARED_CLAIM}(${values})`, values: [] });
  } finally {
    await run(`DEALLOCATE ${PREPARED_CLAIM}`);
    await run('RESET plan_cache_mode');
  }
}

function sqlLiteral(value: unknown): string {
  if (typeof value === 'number') return String(value);
  const element = (item: unknown) => `"${String(item).replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
  const text = value instanceof Date ? value.toISOString() : Array.isArray(value) ? `{${value.map(element).join(',')}}` : String(value);
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * The claim's own scan of the queue table (the row lock claim's only one; the lease claim's in its
 * `tablequeue_claimed` CTE) is an index scan on the claim index, which stops at the claim's limit
 * in claim order; the lease claim's stamp finds its rows by primary key (`id = ANY(ARRAY(…))`);
 * and nothing else reads the table, so no sequential scan anywhere.
 *
 * One bitmap scan passes: on the claim index, for values whose limit is at least the rows the
 * planner expects that index condition to yield. A claim of 100 from a queue of 100 rows among
 * 1,000 (and of 99, measured; 80 stayed an index scan) is planned so: the queue's rows are read
 * either way, through the claim index's queue and due columns, and the bitmap reads their pages
 * in order and sorts them instead of following the index. A bitmap expected to yield more rows
 * than the claim takes would read past the limit, and fails; so does any in the generic plan,
 * which is planned for every limit.
 */
function expectClaimOnIndex(plan: PlanNode, form: FormUnderTest, limit: number | undefined, which: string): void {
  const shown = `${which}:\n${JSON.stringify(plan, undefined, 2)}`;
  const claimed = form === 'rowLock' ? plan : findNode(plan, (node) => node['Subplan Name'] === 'CTE tablequeue_claimed');
  expect(claimed, shown).toBeDefined();
  const claimScans = scanNodesOf(claimed!);
  if (!isBitmapWithinLimit(claimScans, limit)) {
    expect(claimScans.map(describeScan), shown).toEqual([`Index Scan using ${CLAIM_INDEX}`]);
  }
  const stamp = form === 'rowLock' ? undefined : findNode(plan, (node) => node['Subplan Name'] === 'CTE tablequeue_stamp');
  if (form === 'lease') {
    expect(stamp, shown).toBeDefined();
    expect(scanNodesOf(stamp!).map(describeScan), shown).toEqual([`Index Scan using ${PRIMARY_KEY}`]);
  }
  const others = scanNodesOf(plan).filter((node) => !claimScans.includes(node) && (stamp === undefined || !scanNodesOf(stamp).includes(node)));
  expect(others.map(describeScan), shown).toEqual([]);
}

/**
 * A FIFO claim reads three things, each through an index: the group's head (the first row of the
 * group on the claim index), the row itself by primary key, and in the lease form whether any row
 * of the group holds a live lease (the in-work index, from the top of the group's live leases).
 * The lease claim's stamp finds the row by primary key. A group of 100,000 rows read any other way
 * is read whole, for every claim.
 */
function expectFifoClaimOnIndexes(plan: PlanNode, form: FormUnderTest, which: string): void {
  const shown = `${which}:\n${JSON.stringify(plan, undefined, 2)}`;
  const scans = scanNodesOf(plan);
  const inWorkBitmap = scans.filter((node) => isBitmapOn(node, IN_WORK_INDEX));
  const indexScans = new Set(['Index Scan', 'Index Only Scan']);
  const others = scans.filter((node) => !indexScans.has(node['Node Type']) && !inWorkBitmap.includes(node));
  expect(others.map(describeScan), shown).toEqual([]);
  const indexes = [CLAIM_INDEX, PRIMARY_KEY, ...(form === 'lease' ? [IN_WORK_INDEX] : [])];
  const named = scans.map((node) => node['Index Name']).filter((name) => name !== undefined);
  expect(new Set(named), shown).toEqual(new Set(indexes));
}

/**
 * A bitmap scan of the in-work index, or the heap scan it feeds: it reads the pages of the rows
 * that hold a lease (the index holds no others), where a group's head must be read in claim order
 * and stop at the first, which a bitmap cannot.
 */
function isBitmapOn(node: PlanNode, index: string): boolean {
  if (node['Node Type'] === 'Bitmap Index Scan') return node['Index Name'] === index;
  return node['Node Type'] === 'Bitmap Heap Scan' && (node.Plans ?? []).every((child) => isBitmapOn(child, index));
}

function isBitmapWithinLimit(scans: readonly PlanNode[], limit: number | undefined): boolean {
  if (limit === undefined || scans.length !== 2) return false;
  const [heap, index] = scans;
  return (
    heap!['Node Type'] === 'Bitmap Heap Scan' &&
    index!['Node Type'] === 'Bitmap Index Scan' &&
    index!['Index Name'] === CLAIM_INDEX &&
    (index!['Plan Rows'] ?? Infinity) <= limit
  );
}

/** Every node that reads the queue table, in plan order (the UPDATE's own node writes it and is left out). */
function scanNodesOf(node: PlanNode): PlanNode[] {
  const readsTable =
    (node['Relation Name'] === TABLE && node['Node Type'] !== 'ModifyTable') || node['Node Type'] === 'Bitmap Index Scan';
  return [...(readsTable ? [node] : []), ...(node.Plans ?? []).flatMap(scanNodesOf)];
}

function describeScan(node: PlanNode): string {
  return `${node['Node Type']}${node['Index Name'] === undefined ? '' : ` using ${node['Index Name']}`}`;
}

function findNode(node: PlanNode, isWanted: (node: PlanNode) => boolean): PlanNode | undefined {
  if (isWanted(node)) return node;
  for (const child of node.Plans ?? []) {
    const found = findNode(child, isWanted);
    if (found !== undefined) return found;
  }
  return undefined;
}
