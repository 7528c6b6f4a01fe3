import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  Broker,
  ConnectionBudgetError,
  DeclarationError,
  UnsupportedError,
  defineTable,
  type Queue,
  type QueueTable,
} from '../../src/index.js';
import {
  Collector,
  createBroker,
  createTable,
  formsOf,
  jobsDeclaration,
  jobsTable,
  untilStats,
  untilSubscriptions,
  waitForDatabase,
} from '../fixtures.js';
import { publishFromAnotherProcess } from '../processes/spawn-publisher.js';
import type { SuiteContext } from '../run-conformance.js';
import type { TestDatabase } from '../stand.js';

/** Long enough that a row handled within seconds can only have come through a wake-up. */
const LONG_POLL_MS = 60_000;
/** Well before the poll interval: a notification, a claim and a handler on a loaded test machine. */
const WAKE_DEADLINE_MS = 5_000;
const LISTENER_APPLICATION_NAME = 'tablequeue-listener';
const IDLE_POLL_MS = 500;
const IDLE_SUBSCRIPTIONS = 10;

/**
 * The same trigger the README documents for rows that other programs insert: the table's
 * channel and the name of its group column are the trigger's arguments.
 */
const NOTIFY_TRIGGER_SQL = `
CREATE FUNCTION tablequeue_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(TG_ARGV[0], COALESCE(to_jsonb(NEW) ->> TG_ARGV[1], ''));
  RETURN NULL;
END
$$;
CREATE TRIGGER jobs_notify AFTER INSERT ON jobs
  FOR EACH ROW EXECUTE FUNCTION tablequeue_notify('jobs', 'queue');
`;

/** Wake-ups across processes (Postgres LISTEN/NOTIFY) and what an idle broker costs. */
export function listenSuite(context: SuiteContext): void {
  const { stand } = context;
  const form = formsOf(stand)[0]!;

  describe('idle cost', () => {
    it(`an idle broker with ${IDLE_SUBSCRIPTIONS} subscriptions claims at most once per subscription per poll interval`, async () => {
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers, { pollIntervalMs: IDLE_POLL_MS });
      const queues = idleQueues(table);
      for (const queue of queues) broker.subscribe(queue, () => undefined);
      await broker.start();
      await untilSubscriptions(broker, queues, () => everyEmptyClaimed(broker), 'an empty claim of every subscription');
      const startedAt = Date.now();
      const before = totalClaims(broker);
      await untilSubscriptions(broker, queues, () => totalClaims(broker) >= before + IDLE_SUBSCRIPTIONS * 4, 'four more polls of each subscription');
      const intervals = (Date.now() - startedAt) / IDLE_POLL_MS;
      expect(totalClaims(broker) - before).toBeLessThanOrEqual(IDLE_SUBSCRIPTIONS * (Math.ceil(intervals) + 1));
    });
  });

  if (!stand.capabilities.supportsListenNotify) {
    describe('listen elsewhere', () => {
      it('listen: true fails start() as PostgreSQL-only', async () => {
        const table = jobsTable({ form });
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers, { listen: true });
        broker.subscribe(table.queue('emails'), () => undefined);
        const failure = await broker.start().catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(UnsupportedError);
        expect((failure as Error).message).toContain('PostgreSQL-only');
      });
    });
    return;
  }

  describe('LISTEN/NOTIFY wake-ups', () => {
    for (const formUnderTest of formsOf(stand)) {
      it(`${formUnderTest}: a publish from another process is handled long before a 60 s poll interval`, async () => {
        const table = jobsTable({ form: formUnderTest });
        await createTable(stand, context.db, table);
        const broker = createBroker(context.db, context.brokers, { pollIntervalMs: LONG_POLL_MS });
        const handled = new Collector<{ id: string; at: number }>();
        const queue = table.queue('emails');
        broker.subscribe(queue, (message) => handled.push({ id: message.id, at: Date.now() }));
        await broker.start();
        await untilStats(broker, queue, (stats) => stats.emptyClaims >= 1, 'the first empty claim');
        const published = await publishFromAnotherProcess({
          database: context.db.url!,
          table: jobsDeclaration({ form: formUnderTest }),
          queue: 'emails',
          payloads: [1, 2],
        });
        await handled.waitFor(2, WAKE_DEADLINE_MS + 5_000);
        expect(handled.items.map((item) => item.id)).toEqual(published.map((row) => row.id));
        for (const [index, row] of published.entries()) {
          expect(handled.items[index]!.at - row.at).toBeLessThan(WAKE_DEADLINE_MS);
        }
        expect(broker.stats().listener?.notifications).toBeGreaterThanOrEqual(2);
      });
    }

    it('a lost LISTEN session reconnects, listens again and wakes every subscription once', async () => {
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      const broker = createBroker(context.db, context.brokers, { pollIntervalMs: LONG_POLL_MS });
      const warnings = new Collector<string>();
      broker.on('warning', (message) => warnings.push(message));
      const handled = new Collector<string>();
      const queues = [table.queue('emails'), table.queue('sms')];
      for (const queue of queues) broker.subscribe(queue, (message) => handled.push(message.id));
      await broker.start();
      await untilSubscriptions(broker, queues, () => everyEmptyClaimed(broker), 'an empty claim of every subscription');
      const [lost] = await listenerSessions(context.db);
      const claimsBefore = broker.stats().subscriptions.map((subscription) => subscription.claims);

      await context.db.query('SELECT pg_terminate_backend($1)', [lost!.pid]);
      // The server's sessions: only the database shows the new one listening.
      await waitForDatabase(
        async () => (await listenerSessions(context.db)).some((session) => session.pid !== lost!.pid && session.isListening),
        20_000,
        'a new LISTEN session',
      );
      // The listener counts the reconnect, then wakes every subscription, which claims at once.
      await untilSubscriptions(
        broker,
        queues,
        () => broker.stats().subscriptions.every((subscription, index) => subscription.claims > claimsBefore[index]!),
        'a claim of every subscription after the reconnect',
        WAKE_DEADLINE_MS,
      );
      expect(broker.stats().listener?.reconnects).toBe(1);
      expect((await warnings.waitFor(1))[0]).toContain('LISTEN connection was lost');

      const publisher = createBroker(context.db, context.brokers, { pollIntervalMs: LONG_POLL_MS });
      await publisher.start();
      const publishedAt = Date.now();
      const id = await publisher.publish(table.queue('sms'), 'after the reconnect');
      await handled.waitFor(1, WAKE_DEADLINE_MS);
      expect(handled.items).toEqual([id]);
      expect(Date.now() - publishedAt).toBeLessThan(WAKE_DEADLINE_MS);
    });

    it('a row another program inserts wakes the subscription through the documented trigger', async () => {
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      await context.db.exec(NOTIFY_TRIGGER_SQL);
      const broker = createBroker(context.db, context.brokers, { pollIntervalMs: LONG_POLL_MS });
      const handled = new Collector<string>();
      const [emails, sms] = [table.queue<string>('emails'), table.queue<string>('sms')];
      broker.subscribe(emails, (message) => handled.push(message.payload));
      broker.subscribe(sms, (message) => handled.push(`sms ${message.payload}`));
      await broker.start();
      await untilSubscriptions(broker, [emails, sms], () => everyEmptyClaimed(broker), 'an empty claim of every subscription');
      const claimsOfSms = broker.stats().subscriptions[1]!.claims;
      const insertedAt = Date.now();
      await context.db.query("INSERT INTO jobs (queue, payload) VALUES ('emails', $1)", [Buffer.from(JSON.stringify('by hand'))]);
      await handled.waitFor(1, WAKE_DEADLINE_MS);
      expect(handled.items).toEqual(['by hand']);
      expect(Date.now() - insertedAt).toBeLessThan(WAKE_DEADLINE_MS);
      // The payload named the group: the other group's subscription was not woken.
      expect(broker.stats().subscriptions[1]!.claims).toBe(claimsOfSms);
    });

    it("a pool the service passes in listens only with listen: true, and the session counts toward connectionLimit", async () => {
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      const pool = new pg.Pool({ connectionString: context.db.url, max: 3 });
      try {
        const quiet = new Broker({ database: pool, pollIntervalMs: LONG_POLL_MS });
        context.brokers.push(quiet);
        quiet.subscribe(table.queue('emails'), () => undefined);
        await quiet.start();
        expect(quiet.stats().listener).toBeUndefined();
        expect(await listenerSessions(context.db)).toEqual([]);
        await quiet.stop();

        const overBudget = new Broker({ database: pool, listen: true, connectionLimit: 3 });
        context.brokers.push(overBudget);
        overBudget.subscribe(table.queue('emails'), () => undefined);
        const failure = await overBudget.start().catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(ConnectionBudgetError);
        expect((failure as Error).message).toContain('the LISTEN connection for wake-ups across processes would make 4');

        const listening = new Broker({ database: pool, listen: true, connectionLimit: 4, pollIntervalMs: LONG_POLL_MS });
        context.brokers.push(listening);
        listening.subscribe(table.queue('emails'), () => undefined);
        await listening.start();
        expect(await listenerSessions(context.db)).toHaveLength(1);
        await listening.stop();
        // The server ends the session after the client closed it: only the database shows when.
        await waitForDatabase(async () => (await listenerSessions(context.db)).length === 0, 10_000, 'stop() to end the LISTEN session');
      } finally {
        await pool.end();
      }
    });

    it('a table whose channel is over 63 bytes stops start() with a DeclarationError naming it', async () => {
      const longName = `${'s'.repeat(31)}.${'t'.repeat(32)}`;
      const table = defineTable({ schema: 's'.repeat(31), table: 't'.repeat(32), id: 'id', group: 'queue' });
      const broker = createBroker(context.db, context.brokers);
      broker.subscribe(table.queue('emails'), () => undefined);
      const failure = await broker.start().catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(DeclarationError);
      expect((failure as Error).message).toContain(`table "${longName}"`);
      expect((failure as Error).message).toContain('listen: false');
    });

    it(`quiet idle: ${IDLE_SUBSCRIPTIONS} idle subscriptions scan the table at most once each per poll interval and hold no connection but the listener`, async () => {
      const table = jobsTable({ form });
      await createTable(stand, context.db, table);
      // The service's pool ends a connection idle for 100 ms, so between polls the only sessions
      // left are those the broker holds; each ended session has reported its scans.
      const pool = new pg.Pool({ connectionString: context.db.url, max: 4, idleTimeoutMillis: 100 });
      try {
        const broker = new Broker({ database: pool, listen: true, pollIntervalMs: IDLE_POLL_MS });
        context.brokers.push(broker);
        const queues = idleQueues(table);
        for (const queue of queues) broker.subscribe(queue, () => undefined);
        await broker.start();
        const first = await quietSnapshot(context.db, broker);
        await untilSubscriptions(broker, queues, () => totalClaims(broker) >= first.claims + IDLE_SUBSCRIPTIONS * 4, 'four more polls of each subscription');
        const last = await quietSnapshot(context.db, broker);
        const bound = IDLE_SUBSCRIPTIONS * (Math.ceil((last.at - first.at) / IDLE_POLL_MS) + 1);
        expect(last.claims - first.claims).toBeLessThanOrEqual(bound);
        // One claim statement is one scan of the table (through the claim-order index).
        expect(last.scans - first.scans).toBeGreaterThanOrEqual(IDLE_SUBSCRIPTIONS * 3);
        expect(last.scans - first.scans).toBeLessThanOrEqual(bound);
        await broker.stop();
      } finally {
        await pool.end();
      }
    });
  });
}

function idleQueues(table: QueueTable): Queue<unknown>[] {
  return Array.from({ length: IDLE_SUBSCRIPTIONS }, (_, index) => table.queue(`group-${index}`));
}

function everyEmptyClaimed(broker: Broker): boolean {
  return broker.stats().subscriptions.every((subscription) => subscription.emptyClaims >= 1);
}

function totalClaims(broker: Broker): number {
  return broker.stats().subscriptions.reduce((sum, subscription) => sum + subscription.claims, 0);
}

interface ListenerSession {
  readonly pid: number;
  /** Connected, and its last statement was a LISTEN that finished. */
  readonly isListening: boolean;
}

async function listenerSessions(db: TestDatabase): Promise<ListenerSession[]> {
  const rows = await db.query<{ pid: number; state: string; query: string }>(
    'SELECT pid, state, query FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1',
    [LISTENER_APPLICATION_NAME],
  );
  return rows.map((row) => ({ pid: row.pid, isListening: row.state === 'idle' && row.query.startsWith('LISTEN') }));
}

/**
 * Waits until the test database has no client session but the listener's and this admin one (the
 * pool's idle sessions end in the server, where only the database shows it),
 * then reads the claims counted so far and the table's scans, which every ended session reported.
 */
async function quietSnapshot(db: TestDatabase, broker: Broker): Promise<{ claims: number; scans: number; at: number }> {
  await waitForDatabase(
    async () => {
      const sessions = await db.query<{ application_name: string; state: string; query: string }>(
        `SELECT application_name, state, query FROM pg_stat_activity
          WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      );
      return (
        sessions.length === 1 &&
        sessions[0]!.application_name === LISTENER_APPLICATION_NAME &&
        sessions[0]!.state === 'idle' &&
        sessions[0]!.query.startsWith('LISTEN')
      );
    },
    20_000,
    'no session but the listener',
  );
  const at = Date.now();
  const claims = totalClaims(broker);
  const [row] = await db.query<{ scans: unknown }>(
    "SELECT COALESCE(seq_scan, 0) + COALESCE(idx_scan, 0) AS scans FROM pg_stat_user_tables WHERE relname = 'jobs'",
  );
  return { claims, scans: Number(row?.scans ?? 0), at };
}
