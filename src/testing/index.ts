/**
 * `tablequeue/testing`: a real broker for a user's tests, with recorded handlers and waits that
 * resolve on the broker's events. No test framework is imported: failures are `AssertionError`s
 * from node:assert, which vitest, Jest and node:test all report with their message.
 */
export { startTestBroker, TestBroker } from './test-broker.js';
export type { PublishedMessage, TestBrokerOptions } from './test-broker.js';
export { HandlerRecorder } from './handler-recorder.js';
export type { RecordedCall, RecordedOutcome, RecordedSettlement, SettlementFilter } from './handler-recorder.js';
export { DEFAULT_WAIT_TIMEOUT_MS } from './expectation-waits.js';
export type { WaitOptions } from './expectation-waits.js';
