import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPostgresDialect } from '../dialect/postgres/postgres-dialect.js';
import type { NotificationClient, NotificationHandlers } from '../driver/driver.js';
import { ConnectionError, DeclarationError } from '../errors.js';
import type { BoundStatement } from '../statement.js';
import { createTableSpec, type TableSpec } from '../table/table-spec.js';
import { NotifyListener, RECONNECT_FIRST_DELAY_MS, RECONNECT_MAX_DELAY_MS } from './notify-listener.js';

const statements = createPostgresDialect().notify!;
const jobs = createTableSpec({ table: 'jobs', id: 'id', group: 'queue' });
const mail = createTableSpec({ schema: 'app', table: 'mail', id: 'id' });

class FakeSession implements NotificationClient {
  readonly executed: string[] = [];
  isClosed = false;

  constructor(readonly handlers: NotificationHandlers) {}

  async execute(statement: BoundStatement): Promise<void> {
    this.executed.push(statement.sql);
  }

  async close(): Promise<void> {
    this.isClosed = true;
  }
}

/** Opens fake sessions; the next `failures` attempts fail as a server that does not answer. */
class FakeServer {
  readonly sessions: FakeSession[] = [];
  failures = 0;

  readonly openSession = async (handlers: NotificationHandlers): Promise<NotificationClient> => {
    if (this.failures > 0) {
      this.failures -= 1;
      throw new ConnectionError({ host: 'db:5432', message: 'could not connect to postgres at db:5432' });
    }
    const session = new FakeSession(handlers);
    this.sessions.push(session);
    return session;
  };

  get last(): FakeSession {
    return this.sessions.at(-1)!;
  }
}

function createListener(server: FakeServer, tables: TableSpec[] = [jobs, mail]) {
  const wakes: [string, string | undefined][] = [];
  const errors: Record<string, unknown>[] = [];
  const warnings: string[] = [];
  const listener = new NotifyListener({
    openSession: server.openSession,
    statements,
    tables,
    wake: (spec, group) => wakes.push([spec.qualifiedName, group]),
    onError: (_error, detail) => errors.push(detail),
    onWarning: (message) => warnings.push(message),
  });
  return { listener, wakes, errors, warnings };
}

describe('NotifyListener', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it('listens on the channel of every table before open() returns', async () => {
    const server = new FakeServer();
    const { listener } = createListener(server);
    await listener.open();
    expect(server.sessions).toHaveLength(1);
    expect(server.last.executed).toEqual(['LISTEN "jobs"', 'LISTEN "app.mail"']);
    expect(listener.stats()).toEqual({ isListening: true, reconnects: 0, notifications: 0 });
  });

  it('refuses a table whose channel is too long before anything opens', () => {
    const server = new FakeServer();
    const long = createTableSpec({ schema: 's'.repeat(40), table: 't'.repeat(40), id: 'id' });
    expect(() => createListener(server, [jobs, long])).toThrow(DeclarationError);
    expect(server.sessions).toEqual([]);
  });

  it('wakes the group a notification names, every queue of the table for an empty payload, and nothing for other channels', async () => {
    const server = new FakeServer();
    const { listener, wakes } = createListener(server);
    await listener.open();
    server.last.handlers.onNotification('jobs', 'emails');
    server.last.handlers.onNotification('app.mail', '');
    server.last.handlers.onNotification('other', 'emails');
    expect(wakes).toEqual([
      ['jobs', 'emails'],
      ['app.mail', undefined],
    ]);
    expect(listener.stats().notifications).toBe(2);
  });

  it('after a lost session, reconnects, listens again and wakes every table once', async () => {
    const server = new FakeServer();
    const { listener, wakes, warnings } = createListener(server);
    await listener.open();
    server.last.handlers.onLost(new Error('terminating connection due to administrator command'));
    expect(listener.stats().isListening).toBe(false);
    expect(warnings[0]).toContain('the LISTEN connection was lost (terminating connection due to administrator command)');

    await vi.advanceTimersByTimeAsync(RECONNECT_FIRST_DELAY_MS - 1);
    expect(server.sessions).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(server.sessions).toHaveLength(2);
    expect(server.last.executed).toEqual(['LISTEN "jobs"', 'LISTEN "app.mail"']);
    expect(wakes).toEqual([
      ['jobs', undefined],
      ['app.mail', undefined],
    ]);
    expect(listener.stats()).toEqual({ isListening: true, reconnects: 1, notifications: 0 });
  });

  it('retries with a doubling backoff, bounded, until the server answers', async () => {
    const server = new FakeServer();
    const { listener, errors } = createListener(server);
    await listener.open();
    server.failures = 12;
    server.last.handlers.onLost(undefined);
    // 100, 200, … 25,600 ms, then 30,000 ms before each later attempt.
    const doubling = [100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600];
    const waits = [...doubling, RECONNECT_MAX_DELAY_MS, RECONNECT_MAX_DELAY_MS, RECONNECT_MAX_DELAY_MS, RECONNECT_MAX_DELAY_MS];
    for (const wait of waits) await vi.advanceTimersByTimeAsync(wait);
    // Each failed attempt reports when the next one comes; the 13th attempt listens.
    expect(errors.map((detail) => detail['retryInMs'])).toEqual(waits.slice(1));
    expect(listener.stats()).toMatchObject({ isListening: true, reconnects: 1 });
    expect(server.sessions).toHaveLength(2);
  });

  it('stops reconnecting on close, and ignores the loss of a session it closed', async () => {
    const server = new FakeServer();
    const { listener, warnings } = createListener(server);
    await listener.open();
    const first = server.last;
    first.handlers.onLost(undefined);
    await listener.close();
    await vi.advanceTimersByTimeAsync(RECONNECT_MAX_DELAY_MS);
    expect(server.sessions).toEqual([first]);
    expect(warnings).toHaveLength(1);

    const reopened = createListener(server);
    await reopened.listener.open();
    await reopened.listener.close();
    expect(server.last.isClosed).toBe(true);
    server.last.handlers.onLost(undefined);
    expect(reopened.warnings).toEqual([]);
  });

  it('closes a session whose LISTEN failed and fails open()', async () => {
    const server = new FakeServer();
    const failing = async (handlers: NotificationHandlers): Promise<NotificationClient> => {
      const session = (await server.openSession(handlers)) as FakeSession;
      session.execute = () => Promise.reject(new Error('permission denied'));
      return session;
    };
    const listener = new NotifyListener({
      openSession: failing,
      statements,
      tables: [jobs],
      wake: () => undefined,
      onError: () => undefined,
      onWarning: () => undefined,
    });
    await expect(listener.open()).rejects.toThrow('permission denied');
    expect(server.last.isClosed).toBe(true);
  });
});
