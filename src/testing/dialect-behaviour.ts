/**
 * The dialect kit's live check: a real broker given the service's dialect runs the library's
 * paths on a database of the service's (tables of its own, created and dropped): each claim form
 * the dialect takes acks, retries, delays and dead-letters, the lease form renews a lease,
 * settles one at a time and coalesced, and keeps unique keys, a FIFO group comes out in publish
 * order, and a row lock batch settles together. What statements render is the statement check's
 * business (checkDialectStatements); this is whether they do what the library relies on.
 */
import { AssertionError } from 'node:assert';
import { testHooksOf } from '../broker/broker.js';
import type { BrokerOptions } from '../broker/broker-options.js';
import { defineTable, type Queue, type QueueTable } from '../definition/define-table.js';
import type { Message } from '../delivery/message.js';
import { Outcome } from '../delivery/outcome.js';
import type { Dialect } from '../dialect/dialect.js';
import { DeclarationError, UnsupportedError } from '../errors.js';
import { untilSignalled } from '../internal/test-signal.js';
import type { TableDeclaration } from '../table/table-spec.js';
import type { HandlerRecorder } from './handler-recorder.js';
import { startTestBroker, type TestBroker } from './test-broker.js';

export interface DialectBehaviourOptions {
  /**
   * A database for tests, as `new Broker` takes it (a URL, or the service's pool or handle): the
   * kit creates tables named `tq_kit_…` there and drops them. Default, for a dialect based on
   * SQLite only: a fresh database in memory for each scenario.
   */
  readonly database?: string | object;
  /** How long each wait lasts before its scenario fails, in ms. Default 10,000. */
  readonly timeoutMs?: number;
  /**
   * Other options of the kit's brokers, such as `pooler` behind PgBouncer. Its own: polls every
   * 50 ms and a lease of one second, renewed every half second, which a scenario waits for.
   */
  readonly broker?: Omit<BrokerOptions, 'database' | 'dialect'>;
}

export interface DialectScenarioResult {
  readonly name: string;
  readonly outcome: 'passed' | 'failed' | 'skipped';
  /** Why it failed (the assertion or error), or why it was skipped (the dialect refuses the table, or lacks the capability). */
  readonly reason?: string;
}

export interface DialectBehaviourReport {
  readonly dialect: string;
  readonly scenarios: readonly DialectScenarioResult[];
}

const DEFAULT_TIMEOUT_MS = 10_000;

/** What the scripted handlers do with a message, by its payload. */
type Script = 'ack' | 'retryOnce' | 'delayOnce' | 'dead' | 'renew';

interface ScriptedPayload {
  readonly n: number;
  readonly script: Script;
}

/** The outcomes each script leaves, in order. */
const OUTCOMES: Readonly<Record<Script, readonly string[]>> = {
  ack: ['ack'],
  retryOnce: ['retry', 'ack'],
  delayOnce: ['retryAfter', 'ack'],
  dead: ['retry', 'deadLetter'],
  renew: ['ack'],
};

/** The scripts every claim form runs. */
const FORM_SCRIPTS: readonly Script[] = ['ack', 'retryOnce', 'delayOnce', 'dead'];

interface Scenario {
  readonly name: string;
  readonly table: (prefix: string) => QueueTable;
  /** Why the scenario cannot run with this dialect, if it cannot. */
  readonly skip?: (dialect: Dialect) => string | undefined;
  run(harness: TestBroker, table: QueueTable, context: ScenarioContext): Promise<void>;
}

interface ScenarioContext {
  readonly timeoutMs: number;
}

/**
 * Runs every scenario with `dialect` on `options.database` and throws an `AssertionError` naming
 * each that failed, with what it expected and found; returns the report when none failed.
 * Scenarios of a claim form the dialect refuses (its `validateTable`) or lacks a capability for
 * are skipped, and say so.
 */
export async function checkDialectBehaviour(dialect: Dialect, options: DialectBehaviourOptions = {}): Promise<DialectBehaviourReport> {
  const label = typeof dialect?.label === 'string' ? dialect.label : 'the dialect';
  if (options.database === undefined && dialect?.name !== 'sqlite') {
    throw new DeclarationError(
      `checkDialectBehaviour: dialect "${label}" speaks ${String(dialect?.name)}; give it a database for tests, such as { database: 'postgres://…/test' }`,
    );
  }
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const prefix = `tq_kit_${process.pid}_${Date.now().toString(36)}`;
  const scenarios: DialectScenarioResult[] = [];
  for (const scenario of SCENARIOS) {
    scenarios.push(await runScenario(scenario, dialect, prefix, options, timeoutMs));
  }
  const failed = scenarios.filter((scenario) => scenario.outcome === 'failed');
  if (failed.length > 0) {
    const lines = failed.map((scenario) => `  ${scenario.name}: ${scenario.reason ?? ''}`);
    throw new AssertionError({
      message: `dialect "${label}" failed ${failed.length} of ${scenarios.length} scenarios on the database it was given:\n${lines.join('\n')}`,
      operator: 'checkDialectBehaviour',
    });
  }
  return { dialect: label, scenarios };
}

async function runScenario(
  scenario: Scenario,
  dialect: Dialect,
  prefix: string,
  options: DialectBehaviourOptions,
  timeoutMs: number,
): Promise<DialectScenarioResult> {
  const table = scenario.table(prefix);
  const skipped = scenario.skip?.(dialect) ?? refusalOf(dialect, table);
  if (skipped !== undefined) return { name: scenario.name, outcome: 'skipped', reason: skipped };
  let harness: TestBroker | undefined;
  try {
    harness = await startTestBroker({
      ...(options.database === undefined ? {} : { database: options.database }),
      tables: [table],
      timeoutMs,
      broker: { pollIntervalMs: 50, leaseMs: 1_000, ...options.broker, dialect },
    });
    await scenario.run(harness, table, { timeoutMs });
    if (harness.errors.length > 0) {
      throw new AssertionError({ message: `the broker reported ${harness.errors.map((error) => `${error.name}: ${error.message}`).join(' | ')}` });
    }
    return { name: scenario.name, outcome: 'passed' };
  } catch (error) {
    // The broker refusing the form here (a transaction pooler refuses the advisory form) is not the dialect's doing.
    if (error instanceof UnsupportedError) return { name: scenario.name, outcome: 'skipped', reason: `the broker refuses it here: ${error.message}` };
    return { name: scenario.name, outcome: 'failed', reason: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
  } finally {
    await harness?.stop().catch(() => undefined);
  }
}

function refusalOf(dialect: Dialect, table: QueueTable): string | undefined {
  try {
    dialect.validateTable(table.spec);
    return undefined;
  } catch (error) {
    return `the dialect refuses the table: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** Every role a publish and the settlements touch, for one claim form. */
function kitTable(prefix: string, suffix: string, declaration: Partial<TableDeclaration>): QueueTable {
  return defineTable({
    table: `${prefix}_${suffix}`,
    id: 'id',
    group: 'queue',
    priority: 'priority',
    retryAfter: 'retry_after',
    attempt: 'attempt',
    headers: 'headers',
    payload: 'payload',
    ...declaration,
  });
}

/**
 * Publishes one message per script to `queue` and waits until each settled as its script says,
 * then until the queue is idle (nothing comes back), and checks the handler ran once per outcome.
 */
async function runScripts(harness: TestBroker, queue: Queue<ScriptedPayload>, recorder: HandlerRecorder<ScriptedPayload>, scripts: readonly Script[]): Promise<void> {
  const ids = new Map<string, Script>();
  for (const [index, script] of scripts.entries()) ids.set(await harness.publish(queue, { n: index, script }), script);
  const expected = scripts.flatMap((script) => OUTCOMES[script]);
  await recorder.waitForSettled({ count: expected.length });
  // Settled as scripted first: an ack that leaves its row claimable shows as a second settlement
  // of it, which says more than the wait for idle that then never ends.
  const notIdle: unknown = await recorder.waitForIdle().then(() => undefined, (error: unknown) => error);
  const wrong = [...ids].flatMap(([id, script]) => {
    const outcomes = recorder.settlements.filter((settlement) => settlement.id === id).map((settlement) => settlement.outcome);
    const wanted = OUTCOMES[script];
    return outcomes.join() === wanted.join() ? [] : [`the "${script}" message settled ${describeOutcomes(outcomes)}, expected ${wanted.join(', ')}`];
  });
  if (wrong.length > 0) throw new AssertionError({ message: `"${queue.label}": ${wrong.join('; ')}` });
  if (notIdle !== undefined) throw notIdle;
  const dead = recorder.settlements.find((settlement) => settlement.outcome === 'deadLetter');
  if (scripts.includes('dead') && dead?.deadLetter === undefined) {
    throw new AssertionError({ message: `"${queue.label}": the dead letter was not moved to its group` });
  }
  recorder.assertCalledTimes(expected.length);
}

function describeOutcomes(outcomes: readonly string[]): string {
  if (outcomes.length === 0) return 'never';
  if (outcomes.length <= 4) return outcomes.join(', ');
  return `${outcomes.slice(0, 3).join(', ')} and on: ${outcomes.length} times`;
}

/** A handler that follows each message's script; `renew` waits until the subscription renewed a lease. */
function scriptedHandler(harness: TestBroker, queue: Queue<ScriptedPayload>, timeoutMs: number) {
  return async (message: Message<ScriptedPayload>): Promise<Outcome> => {
    switch (message.payload.script) {
      case 'ack':
        return Outcome.ack();
      case 'retryOnce':
        return message.attempt <= 1 ? Outcome.retry() : Outcome.ack();
      case 'delayOnce':
        return message.attempt <= 1 ? Outcome.retryAfter(1) : Outcome.ack();
      case 'dead':
        return Outcome.retry();
      case 'renew':
        await untilLeaseRenewed(harness, queue, timeoutMs);
        return Outcome.ack();
    }
  };
}

/** Resolves once the subscription counts a renewal, checked at each of its keeper's rounds. */
async function untilLeaseRenewed(harness: TestBroker, queue: Queue<ScriptedPayload>, timeoutMs: number): Promise<void> {
  const renewals = (): number => harness.broker.stats().subscriptions.find((subscription) => subscription.queue === queue.label)?.leaseRenewals ?? 0;
  const { keeper } = testHooksOf(harness.broker, queue);
  await untilSignalled([keeper.roundEnded], () => renewals() > 0, `a lease renewal of "${queue.label}"`, timeoutMs);
}

function scriptsOf(...extra: Script[]): Script[] {
  return [...FORM_SCRIPTS, ...extra];
}

const retryQuickly = { maxAttempts: 2, deadLetter: 'dead', retryBackoff: { initialMs: 1, maxMs: 1 } } as const;

const SCENARIOS: readonly Scenario[] = [
  {
    name: 'lease form: ack, retry, delay, dead letter and a lease renewed, settled coalesced and one at a time',
    table: (prefix) => kitTable(prefix, 'lease', { lockedUntil: 'locked_until', processedAt: 'processed_at', dedupeKey: 'dedupe_key' }),
    async run(harness, table, { timeoutMs }) {
      const coalesced = table.queue<ScriptedPayload>('coalesced');
      const oneByOne = table.queue<ScriptedPayload>('one_by_one');
      const recorders = [
        { queue: coalesced, recorder: harness.record(coalesced, scriptedHandler(harness, coalesced, timeoutMs), { ...retryQuickly, workers: 2 }) },
        {
          queue: oneByOne,
          recorder: harness.record(oneByOne, scriptedHandler(harness, oneByOne, timeoutMs), { ...retryQuickly, coalesceSettlements: false }),
        },
      ];
      for (const { queue, recorder } of recorders) await runScripts(harness, queue, recorder, scriptsOf('renew'));
    },
  },
  {
    name: 'lease form: a unique key refuses a duplicate and replaces a waiting row',
    table: (prefix) => kitTable(prefix, 'keys', { lockedUntil: 'locked_until', dedupeKey: 'dedupe_key' }),
    async run(harness, table) {
      const keyed = table.queue<ScriptedPayload>('keyed');
      const first = await harness.publish(keyed, { n: 1, script: 'ack' }, { dedupeKey: 'k' });
      const duplicate = await harness.publish(keyed, { n: 2, script: 'ack' }, { dedupeKey: 'k' });
      const replaced = await harness.publish(keyed, { n: 3, script: 'ack' }, { dedupeKey: 'k', dedupe: 'replace' });
      const statuses = [first.status, duplicate.status, replaced.status];
      if (statuses.join() !== 'published,duplicate,replaced' || duplicate.id !== first.id || replaced.id !== first.id) {
        throw new AssertionError({
          message: `three publishes of one key answered ${statuses.join(', ')} (ids ${first.id}, ${duplicate.id}, ${replaced.id}); expected published, duplicate, replaced, all of the first row`,
        });
      }
    },
  },
  {
    name: 'lease form: a FIFO group comes out in publish order',
    table: (prefix) => kitTable(prefix, 'fifo', { group: { column: 'queue', fifo: true }, lockedUntil: 'locked_until' }),
    async run(harness, table) {
      const ordered = table.queue<ScriptedPayload>('ordered');
      const recorder = harness.record(ordered, () => Outcome.ack(), { workers: 3 });
      await harness.publishMany(ordered, [1, 2, 3, 4].map((n) => ({ payload: { n, script: 'ack' as const } })));
      await recorder.waitForSettled({ count: 4, outcome: 'ack' });
      const order = recorder.payloads.map((payload) => payload.n);
      if (order.join() !== '1,2,3,4') throw new AssertionError({ message: `handled in the order ${order.join(', ')}, expected 1, 2, 3, 4`, actual: order, expected: [1, 2, 3, 4] });
    },
  },
  {
    name: 'row lock form: ack, retry, delay, dead letter, and a batch settled together',
    table: (prefix) => kitTable(prefix, 'row_lock', { processedAt: 'processed_at' }),
    skip: (dialect) => (dialect.capabilities.supportsRowLock ? undefined : 'the dialect has no row locks (supportsRowLock)'),
    async run(harness, table, { timeoutMs }) {
      const work = table.queue<ScriptedPayload>('work');
      const batch = table.queue<ScriptedPayload>('batch');
      const recorder = harness.record(work, scriptedHandler(harness, work, timeoutMs), retryQuickly);
      const batches = harness.record(batch, (messages) => messages.map(() => Outcome.ack()), { batch: 3 });
      await runScripts(harness, work, recorder, scriptsOf());
      await harness.publishMany(batch, [1, 2, 3].map((n) => ({ payload: { n, script: 'ack' as const } })));
      await batches.waitForSettled({ count: 3, outcome: 'ack' });
      await batches.waitForIdle();
      batches.assertCalledTimes(1);
    },
  },
  {
    name: 'advisory lock form: ack, retry, delay and dead letter',
    table: (prefix) => kitTable(prefix, 'advisory', { advisoryLock: 'kit-{id}' }),
    async run(harness, table, { timeoutMs }) {
      const work = table.queue<ScriptedPayload>('work');
      const recorder = harness.record(work, scriptedHandler(harness, work, timeoutMs), retryQuickly);
      await runScripts(harness, work, recorder, scriptsOf());
    },
  },
];
