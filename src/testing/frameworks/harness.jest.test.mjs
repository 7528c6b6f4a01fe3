// tablequeue/testing under Jest (ESM through --experimental-vm-modules), against the installed package.
import { afterEach, expect, test } from '@jest/globals';
import { defineTable, Outcome } from 'tablequeue';
import { startTestBroker } from 'tablequeue/testing';
import { scenarios } from './harness-scenarios.mjs';

for (const scenario of scenarios) test(scenario.name, scenario.run);

// The README's Jest example, as a user writes it.
const jobs = defineTable({ table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until', payload: 'payload' });
const welcome = jobs.queue('welcome');
let harness;
afterEach(() => harness?.stop());

test('welcomes a new user (Jest)', async () => {
  harness = await startTestBroker({ tables: [jobs] });
  const recorder = harness.record(welcome, (message) => (message.payload.email.endsWith('@example.com') ? Outcome.ack() : Outcome.drop()));
  await harness.publish(welcome, { email: 'ada@example.com' });
  const [settlement] = await recorder.waitForSettled();
  expect(settlement.outcome).toBe('ack');
  expect(recorder.calls[0].payload).toEqual({ email: 'ada@example.com' });
});
