import { afterEach, beforeEach, describe } from 'vitest';
import type { Broker } from '../src/index.js';
import { stopAll } from './fixtures.js';
import { requireLive } from './require-live.js';
import type { Stand, TestDatabase } from './stand.js';
import type { GaleraStand } from './stands/galera-stand.js';
import { cancelSuite } from './suites/cancel.suite.js';
import { claimPlansSuite } from './suites/claim-plans.suite.js';
import { cliSuite } from './suites/cli.suite.js';
import { coalescingSuite } from './suites/coalescing.suite.js';
import { concurrencySuite } from './suites/concurrency.suite.js';
import { rateSuite } from './suites/rate.suite.js';
import { cliOperationsSuite } from './suites/cli-operations.suite.js';
import { dashboardSuite } from './suites/dashboard.suite.js';
import { dedupeKeysSuite } from './suites/dedupe-keys.suite.js';
import { eventLoopSuite } from './suites/event-loop.suite.js';
import { advisorySuite } from './suites/advisory.suite.js';
import { asyncapiSuite } from './suites/asyncapi.suite.js';
import { failureVisibilitySuite } from './suites/failure-visibility.suite.js';
import { fifoSuite } from './suites/fifo.suite.js';
import { galeraSuite } from './suites/galera.suite.js';
import { hostileInputSuite } from './suites/hostile-input.suite.js';
import { inputLimitsSuite } from './suites/input-limits.suite.js';
import { leaseSuite } from './suites/lease.suite.js';
import { listenSuite } from './suites/listen.suite.js';
import { metricsSuite } from './suites/metrics.suite.js';
import { outboxDestinationsSuite } from './suites/outbox-destinations.suite.js';
import { outboxSuite } from './suites/outbox.suite.js';
import { keyedReplicasSuite, partitioningSuite } from './suites/partitioning.suite.js';
import { pauseSuite } from './suites/pause.suite.js';
import { poolerSuite } from './suites/pooler.suite.js';
import { processSuite } from './suites/process.suite.js';
import { retentionSuite } from './suites/retention.suite.js';
import { retrySuite } from './suites/retry.suite.js';
import { rowLockClaimsSuite } from './suites/row-lock-claims.suite.js';
import { rowModeSuite } from './suites/row-mode.suite.js';
import { routesSuite } from './suites/routes.suite.js';
import { schedulesSuite } from './suites/schedules.suite.js';
import { serviceDialectSuite } from './suites/service-dialect.suite.js';
import { serviceStatementsSuite } from './suites/service-statements.suite.js';
import { serviceSuite } from './suites/service.suite.js';
import { settleSuite } from './suites/settle.suite.js';
import { sideTablesSuite } from './suites/side-tables.suite.js';
import { renewalConnectionSuite, sharedPoolSuite } from './suites/shared-pool.suite.js';
import { startupSuite } from './suites/startup.suite.js';
import { stopCancelSuite } from './suites/stop-cancel.suite.js';
import { testingHarnessSuite } from './suites/testing-harness.suite.js';
import { textCollationSuite } from './suites/text-collation.suite.js';
import { timeoutsSuite } from './suites/timeouts.suite.js';
import { tracingSuite } from './suites/tracing.suite.js';
import { transactionalSuite } from './suites/transactional.suite.js';
import { wakeSuite } from './suites/wake.suite.js';

/** What every suite gets: the stand, this test's own database, and the brokers to stop after it. */
export interface SuiteContext {
  readonly stand: Stand;
  db: TestDatabase;
  readonly brokers: Broker[];
}

/**
 * Registers the suite of what matters through a pooler (a PgBouncer stand): a test database per
 * test, as for every stand, but not the whole conformance run, which the server's own stand
 * already makes.
 */
export function runPoolerConformance(stand: Stand): Promise<void> {
  return requireLive(stand, () => {
    describe(stand.name, () => {
      const context = suiteContextOf(stand);
      poolerSuite(context);
    });
  });
}

/**
 * Registers the claim plans suite (the postgres stand): what PostgreSQL plans for the claim
 * statements at 100,000 rows, read from its EXPLAIN output. A file of its own, so it runs beside
 * the stand's long conformance file rather than after it.
 */
export function runClaimPlanConformance(stand: Stand): Promise<void> {
  return requireLive(stand, () => {
    describe(`${stand.name} claim plans`, () => {
      claimPlansSuite(suiteContextOf(stand));
    });
  });
}

/**
 * Registers what a Galera cluster changes (the galera stand), not the whole conformance run, which
 * the MariaDB stand already makes on one server: through one node, the suites of both claim forms'
 * claims, settlements, leases, coalescing, wake-ups and start-up checks; the Galera suite, whose
 * brokers are spread over the three nodes (FIFO groups among them), and its refusals and node kill.
 * Left out for CI's time: the suites that start replica processes (FIFO, dedupe keys, process),
 * which took 130 s of the 210 s the first subset did.
 */
export function runGaleraConformance(stand: GaleraStand): Promise<void> {
  return requireLive(stand, () => {
    describe(stand.name, () => {
      const context = suiteContextOf(stand);
      startupSuite(context);
      settleSuite(context);
      leaseSuite(context);
      coalescingSuite(context);
      rowModeSuite(context);
      wakeSuite(context);
      galeraSuite(context, stand.nodeUrls);
    });
  });
}

/** The context every suite shares, with a fresh database before each test and its brokers stopped after. */
function suiteContextOf(stand: Stand): SuiteContext {
  const context: SuiteContext = { stand, db: undefined as unknown as TestDatabase, brokers: [] };
  beforeEach(async () => {
    context.db = await stand.createDatabase();
  });
  afterEach(async () => {
    await stopAll(context.brokers);
    await context.db.drop();
  });
  return context;
}

/**
 * Registers every suite against one stand. Suites skip by capability, never by database name.
 * An unreachable server skips the stand, or fails it when REQUIRE_LIVE=1 (as CI sets).
 */
export function runConformance(stand: Stand): Promise<void> {
  return requireLive(stand, () => {
    describe(stand.name, () => {
      const context = suiteContextOf(stand);
      startupSuite(context);
      settleSuite(context);
      rowLockClaimsSuite(context);
      eventLoopSuite(context);
      retrySuite(context);
      timeoutsSuite(context);
      failureVisibilitySuite(context);
      leaseSuite(context);
      wakeSuite(context);
      listenSuite(context);
      processSuite(context);
      serviceSuite(context);
      serviceDialectSuite(context);
      serviceStatementsSuite(context);
      fifoSuite(context);
      partitioningSuite(context);
      keyedReplicasSuite(context);
      sharedPoolSuite(context);
      renewalConnectionSuite(context);
      stopCancelSuite(context);
      cliSuite(context);
      cliOperationsSuite(context);
      dashboardSuite(context);
      rowModeSuite(context);
      advisorySuite(context);
      transactionalSuite(context);
      coalescingSuite(context);
      concurrencySuite(context);
      rateSuite(context);
      hostileInputSuite(context);
      inputLimitsSuite(context);
      dedupeKeysSuite(context);
      schedulesSuite(context);
      retentionSuite(context);
      pauseSuite(context);
      cancelSuite(context);
      asyncapiSuite(context);
      sideTablesSuite(context);
      routesSuite(context);
      textCollationSuite(context);
      metricsSuite(context);
      tracingSuite(context);
      outboxSuite(context);
      outboxDestinationsSuite(context);
      testingHarnessSuite(context);
    });
  });
}
