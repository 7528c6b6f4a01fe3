import { AssertionError } from 'node:assert';
import { afterEach, describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import { Outcome } from '../delivery/outcome.js';
import { startTestBroker, type TestBroker } from './test-broker.js';

const jobs = defineTable({
  table: 'jobs',
  id: 'id',
  group: 'queue',
  attempt: 'attempt',
  retryAfter: 'retry_after',
  lockedUntil: 'locked_until',
  headers: 'headers',
  payload: 'payload',
});
const emails = jobs.queue<{ to: string }>('emails');
const receipts = jobs.queue<{ for: string }>('receipts');

const started: TestBroker[] = [];
async function testBroker(options: Parameters<typeof startTestBroker>[0] = {}): Promise<TestBroker> {
  const harness = await startTestBroker({ tables: [jobs], ...options });
  started.push(harness);
  return harness;
}

afterEach(async () => {
  await Promise.all(started.splice(0).map((harness) => harness.stop()));
});

// SQLite in memory, the default: each test its own database, created with its tables.
describe('tablequeue/testing on SQLite in memory', () => {
  it('records a call and its ack, and what the test published', async () => {
    const harness = await testBroker();
    const recorder = harness.record(emails, (message) => (message.payload.to.includes('@') ? Outcome.ack() : Outcome.drop()));
    const id = await harness.publish(emails, { to: 'a@example.com' });

    const [settlement] = await recorder.waitForSettled();
    expect(settlement).toMatchObject({ id, attempt: 1, outcome: 'ack', decodeFailed: false });
    expect(recorder.calls).toHaveLength(1);
    expect(recorder.calls[0]!.payload).toEqual({ to: 'a@example.com' });
    expect(recorder.calls[0]!.returned).toEqual({ kind: 'ack' });
    recorder.assertCalledTimes(1);
    recorder.assertCalledWith({ to: 'a@example.com' });
    recorder.assertSettled('ack');
    expect(harness.published(emails)).toEqual([{ id, payload: { to: 'a@example.com' }, options: undefined, from: 'test' }]);
  });

  it('counts settlements by outcome: drop, retryAfter with its due time, then ack on the next attempt', async () => {
    const harness = await testBroker();
    const recorder = harness.record(emails, (message) => {
      if (message.payload.to === 'nobody') return Outcome.drop();
      return message.attempt === 1 ? Outcome.retryAfter(0) : Outcome.ack();
    });
    await harness.publish(emails, { to: 'nobody' });
    await harness.publish(emails, { to: 'b@example.com' });

    await recorder.waitForSettled({ outcome: 'ack' });
    expect([...recorder.outcomes].sort()).toEqual(['ack', 'drop', 'retryAfter']);
    const retried = recorder.settlements.find((settlement) => settlement.outcome === 'retryAfter')!;
    expect(retried.nextAttemptAt).toBeInstanceOf(Date);
    expect(recorder.settlements.find((settlement) => settlement.outcome === 'ack')!.attempt).toBe(2);
  });

  it('records a throw, the retries it caused and the dead letter, with where it went', async () => {
    const harness = await testBroker();
    const recorder = harness.record(
      emails,
      () => {
        throw new Error('smtp down');
      },
      { maxAttempts: 2, deadLetter: 'emails_dead', retryBackoff: { initialMs: 1, maxMs: 1 } },
    );
    const id = await harness.publish(emails, { to: 'c@example.com' });

    const [dead] = await recorder.waitForSettled({ outcome: 'deadLetter' });
    expect(recorder.outcomes).toEqual(['retryAfter', 'deadLetter']);
    expect(dead).toMatchObject({ id, attempt: 2, deadLetter: { group: 'emails_dead' } });
    expect((dead!.error as Error).message).toBe('smtp down');
    expect(recorder.calls.map((call) => (call.threw as Error).message)).toEqual(['smtp down', 'smtp down']);
    expect(recorder.errors.map((error) => error.name)).toEqual(['HandlerError', 'HandlerError']);
  });

  it('hands a batch handler the rows of one publishMany together', async () => {
    const harness = await testBroker();
    const recorder = harness.record(emails, (messages) => messages.map(() => Outcome.ack()), { batch: 10 });
    await harness.publishMany(emails, ['x', 'y', 'z'].map((to) => ({ payload: { to } })));

    await recorder.waitForSettled({ count: 3 });
    expect(recorder.batchSizes).toEqual([3]);
    expect(recorder.payloads).toEqual([{ to: 'x' }, { to: 'y' }, { to: 'z' }]);
  });

  it('tells a message that did not decode from one the handler saw', async () => {
    const harness = await testBroker();
    const recorder = harness.record(emails, () => undefined, {
      decode: (raw) => {
        const payload = JSON.parse(raw.toString('utf8')) as { to: string };
        if (payload.to === '') throw new Error('no recipient');
        return payload;
      },
    });
    await harness.publish(emails, { to: '' });
    await harness.publish(emails, { to: 'd@example.com' });

    const [failure] = await recorder.waitForDecodeFailures();
    await recorder.waitForSettled({ count: 2 });
    expect(failure).toMatchObject({ outcome: 'drop', decodeFailed: true });
    expect((failure!.error as Error).message).toBe('no recipient');
    expect(recorder.payloads).toEqual([{ to: 'd@example.com' }]);
    expect(recorder.errors.map((error) => error.name)).toEqual(['DecodeError']);
  });

  it("records a handler's own publishes, and waits for them", async () => {
    const harness = await testBroker();
    harness.record(emails, async (message, context) => {
      await context.publish(receipts, { for: message.payload.to });
    });
    const receiptsRecorder = harness.record(receipts);
    await harness.publish(emails, { to: 'e@example.com' });

    const [receipt] = await harness.waitForPublished(receipts);
    expect(receipt).toMatchObject({ payload: { for: 'e@example.com' }, from: 'handler' });
    await receiptsRecorder.waitForSettled({ id: receipt!.id! });
    receiptsRecorder.assertCalledWith({ for: 'e@example.com' });
  });

  it('waits for idle to show that nothing is due: a delayed message is not handled', async () => {
    const harness = await testBroker();
    const recorder = harness.record(emails);
    await harness.publish(emails, { to: 'later@example.com' }, { delayMs: 60_000 });
    await harness.publish(emails, { to: 'now@example.com' });

    await harness.waitForIdle();
    expect(recorder.payloads).toEqual([{ to: 'now@example.com' }]);
    recorder.assertSettled('ack', { count: 1 });
  });

  it('fails a wait after its timeout saying what it expected and what it saw', async () => {
    const harness = await testBroker({ timeoutMs: 300 });
    const recorder = harness.record(emails, () => {
      throw new Error('template missing');
    }, { retryBackoff: { initialMs: 60_000, maxMs: 60_000 } });
    await harness.publish(emails, { to: 'f@example.com' });

    const failure = await recorder.waitForSettled({ outcome: 'ack' }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(AssertionError);
    const { message, stack } = failure as AssertionError;
    expect(message).toMatch(/^waitForSettled: waited 300 ms for 1 settlement as ack of "jobs\/emails"; saw 1 call and 1 settlement \(message \d+ attempt 1 retryAfter: template missing\); broker errors: HandlerError: /);
    // The stack is the test's own call, not the timer's.
    expect(stack).toContain('test-broker.test.ts');
  });

  it('sums up a failure that saw many settlements: counts per outcome, the last few, each error once with its count', async () => {
    const immediate = defineTable({ table: 'immediate_jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', payload: 'payload' });
    const queue = immediate.queue<string>('spins');
    const harness = await testBroker({ tables: [immediate], timeoutMs: 300 });
    // Without a retryAfter column every retry is due at once: the handler runs again and again.
    const recorder = harness.record(queue, () => {
      throw new Error('still failing');
    });
    await harness.publish(queue, 'x');
    await recorder.waitForSettled({ count: 6 });

    const failure = (await recorder.waitForSettled({ outcome: 'ack' }).catch((error: unknown) => error)) as AssertionError;
    expect(failure.message).toMatch(
      /saw \d+ calls and (\d+) settlements \(\1 retry; the last 5: (message \d+ attempt 1 retry: still failing, ){4}message \d+ attempt 1 retry: still failing\); broker errors: HandlerError: still failing \(\d+ times\); broker warnings: subscription "immediate_jobs\/spins": table "immediate_jobs" has no retryAfter column/,
    );
  });

  it('fails the assertions with the calls it saw', async () => {
    const harness = await testBroker();
    const recorder = harness.record(emails);
    await harness.publish(emails, { to: 'g@example.com' });
    await recorder.waitForCalls(1);

    expect(() => recorder.assertCalledTimes(2)).toThrow(/expected the handler of "jobs\/emails" to be called 2 times; saw 1 call/);
    expect(() => recorder.assertCalledWith({ to: 'h@example.com' })).toThrow(
      'expected the handler of "jobs/emails" to receive {"to":"h@example.com"}; it received {"to":"g@example.com"}',
    );
  });

  it('fails a pending wait at stop, and refuses a recorder on threads', async () => {
    const harness = await testBroker({ timeoutMs: 60_000 });
    expect(() => harness.record(emails, undefined, { onThreads: { threads: 1, module: 'handler.js' } })).toThrow(/cannot be recorded/);
    const recorder = harness.record(emails);
    await harness.start();
    const waiting = recorder.waitForCalls(1).catch((error: unknown) => error);
    await harness.stop();
    expect(String(await waiting)).toMatch(/waitForCalls: the test broker stopped.* 1 call of the handler of "jobs\/emails"/);
  });

  it('drops its tables at stop, or keeps them when asked', async () => {
    const { default: Database } = await import('better-sqlite3');
    const handle = new Database(':memory:');
    try {
      const tableNames = (): string[] =>
        (handle.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").all() as { name: string }[]).map((row) => row.name);
      const dropped = await startTestBroker({ database: handle, tables: [jobs] });
      expect(tableNames()).toEqual(['jobs']);
      await dropped.stop();
      expect(tableNames()).toEqual([]);
      const kept = await startTestBroker({ database: handle, tables: [jobs], keepTables: true });
      await kept.stop();
      expect(tableNames()).toEqual(['jobs']);
      expect(handle.open).toBe(true);
    } finally {
      handle.close();
    }
  });
});
