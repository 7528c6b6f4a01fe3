import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { defineTable, Outcome, type Handler } from 'tablequeue';
import { startTestBroker } from 'tablequeue/testing';

// The service's queue and handler, as its own modules would export them.
const jobs = defineTable({
  table: `welcome_jobs_${process.pid}`,
  id: 'id',
  group: 'queue',
  attempt: 'attempt',
  retryAfter: 'retry_after',
  lockedUntil: 'locked_until',
  payload: 'payload',
});
const welcome = jobs.queue<{ email: string }>('welcome');
const sent: string[] = [];
const sendWelcome: Handler<{ email: string }> = (message) => {
  if (!message.payload.email.includes('@')) return Outcome.drop();
  if (message.payload.email.startsWith('flaky') && message.attempt === 1) throw new Error('smtp timeout');
  sent.push(message.payload.email);
  return Outcome.ack();
};

// Its tests under node:test (run as `node --test`, or as this program: node runs the tests in it).
test('sends a welcome, drops an address without @ (SQLite in memory)', async () => {
  const harness = await startTestBroker({ tables: [jobs] });
  try {
    const welcomes = harness.record(welcome, sendWelcome);
    await harness.publish(welcome, { email: 'ada@example.com' });
    await harness.publish(welcome, { email: 'not an address' });

    await welcomes.waitForSettled({ count: 2 });
    welcomes.assertSettled('ack');
    welcomes.assertSettled('drop');
    assert.ok(sent.includes('ada@example.com'));
  } finally {
    await harness.stop();
  }
});

test('retries a send that timed out, and runs nothing more (PostgreSQL through a URL)', async () => {
  const harness = await startTestBroker({
    tables: [jobs],
    database: process.env.POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  });
  try {
    const welcomes = harness.record(welcome, sendWelcome, { maxAttempts: 2, deadLetter: 'dead', retryBackoff: { initialMs: 1, maxMs: 1 } });
    const flaky = await harness.publish(welcome, { email: 'flaky@example.com' });
    await welcomes.waitForSettled({ id: flaky, outcome: 'ack' });
    assert.deepEqual(
      welcomes.settlements.filter((settlement) => settlement.id === flaky).map((settlement) => settlement.outcome),
      ['retryAfter', 'ack'],
    );

    // Nothing else is due: the handler was called twice, no more.
    await welcomes.waitForIdle();
    welcomes.assertCalledTimes(2);
  } finally {
    await harness.stop();
  }
});
