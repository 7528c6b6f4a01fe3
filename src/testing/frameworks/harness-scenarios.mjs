// The harness's checks that each framework runs (harness.node-test.mjs, harness.jest.test.mjs),
// written as plain async functions against the installed package: tablequeue/testing must need
// nothing from the framework that runs it. src/published-package.test.ts installs the packed
// tarball beside these files and runs them.
import assert from 'node:assert/strict';
import { defineTable, Outcome } from 'tablequeue';
import { startTestBroker } from 'tablequeue/testing';

const jobs = defineTable({
  table: 'jobs',
  id: 'id',
  group: 'queue',
  attempt: 'attempt',
  retryAfter: 'retry_after',
  lockedUntil: 'locked_until',
  payload: 'payload',
});
const emails = jobs.queue('emails');

/** Runs `body` with a test broker over a fresh SQLite database in memory, stopped after. */
async function withTestBroker(options, body) {
  const harness = await startTestBroker({ tables: [jobs], ...options });
  try {
    await body(harness);
  } finally {
    await harness.stop();
  }
}

export const scenarios = [
  {
    name: 'records a call and its ack on SQLite in memory',
    run: () =>
      withTestBroker({}, async (harness) => {
        const recorder = harness.record(emails);
        const id = await harness.publish(emails, { to: 'a@example.com' });
        const [settlement] = await recorder.waitForSettled();
        assert.equal(settlement.id, id);
        assert.equal(settlement.outcome, 'ack');
        recorder.assertCalledTimes(1);
        recorder.assertCalledWith({ to: 'a@example.com' });
      }),
  },
  {
    name: 'records the retries of a throwing handler and its dead letter',
    run: () =>
      withTestBroker({}, async (harness) => {
        const recorder = harness.record(
          emails,
          () => {
            throw new Error('smtp down');
          },
          { maxAttempts: 2, deadLetter: 'emails_dead', retryBackoff: { initialMs: 1, maxMs: 1 } },
        );
        await harness.publish(emails, { to: 'b@example.com' });
        const [dead] = await recorder.waitForSettled({ outcome: 'deadLetter' });
        assert.deepEqual(recorder.outcomes, ['retryAfter', 'deadLetter']);
        assert.deepEqual(dead.deadLetter, { group: 'emails_dead' });
        assert.equal(dead.error.message, 'smtp down');
      }),
  },
  {
    name: 'hands a batch handler the rows of one publishMany and records its outcomes',
    run: () =>
      withTestBroker({}, async (harness) => {
        const recorder = harness.record(emails, (messages) => messages.map((m) => (m.payload.to === 'x' ? Outcome.drop() : Outcome.ack())), {
          batch: 5,
        });
        await harness.publishMany(emails, [{ payload: { to: 'x' } }, { payload: { to: 'y' } }]);
        await recorder.waitForSettled({ count: 2 });
        assert.deepEqual(recorder.batchSizes, [2]);
        recorder.assertSettled('drop');
        recorder.assertSettled('ack');
      }),
  },
  {
    name: 'fails a wait that times out with an AssertionError saying what it expected and saw',
    run: () =>
      withTestBroker({ timeoutMs: 200 }, async (harness) => {
        const recorder = harness.record(emails, () => Outcome.drop());
        await harness.publish(emails, { to: 'c@example.com' });
        await assert.rejects(recorder.waitForSettled({ outcome: 'ack' }), (error) => {
          assert.equal(error.name, 'AssertionError');
          assert.match(error.message, /^waitForSettled: waited 200 ms for 1 settlement as ack of "jobs\/emails"; saw 1 call and 1 settlement \(message \d+ attempt 1 drop\)$/);
          return true;
        });
      }),
  },
];
