// tablequeue/testing under node:test (`node --test`), against the installed package.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { defineTable } from 'tablequeue';
import { startTestBroker } from 'tablequeue/testing';
import { scenarios } from './harness-scenarios.mjs';

for (const scenario of scenarios) test(scenario.name, scenario.run);

// The README's node:test example, as a user writes it.
const jobs = defineTable({ table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', payload: 'payload' });
const welcome = jobs.queue('welcome');
let harness;
before(async () => {
  harness = await startTestBroker({ tables: [jobs] });
});
after(() => harness.stop());

test('welcomes a new user (node:test)', async () => {
  const sent = [];
  const recorder = harness.record(welcome, (message) => {
    sent.push(message.payload.email);
  });
  await harness.publish(welcome, { email: 'ada@example.com' });
  await recorder.waitForSettled({ outcome: 'ack' });
  assert.deepEqual(sent, ['ada@example.com']);
});
