/**
 * `tablequeue/testing`: a real broker for a user's tests, with recorded handlers and waits that
 * resolve on the broker's events, and the kit that checks a dialect of the service's own. No test
 * framework is imported: failures are `AssertionError`s from node:assert, which vitest, Jest and
 * node:test all report with their message.
 */
export { startTestBroker, TestBroker } from './test-broker.js';
export type { PublishedMessage, TestBrokerOptions } from './test-broker.js';
export { HandlerRecorder } from './handler-recorder.js';
export type { RecordedCall, RecordedOutcome, RecordedSettlement, SettlementFilter } from './handler-recorder.js';
export { DEFAULT_WAIT_TIMEOUT_MS } from './expectation-waits.js';
export type { WaitOptions } from './expectation-waits.js';
export { checkDialectStatements, reportDialectStatements } from './dialect-kit.js';
export type { DialectProblem, DialectStatementsOptions, DialectStatementsReport } from './dialect-kit.js';
export { checkDialectBehaviour } from './dialect-behaviour.js';
export type { DialectBehaviourOptions, DialectBehaviourReport, DialectScenarioResult } from './dialect-behaviour.js';
