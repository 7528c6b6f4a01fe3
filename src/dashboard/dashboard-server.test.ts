import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import type { PauseRequest, RequeueRequest } from './dashboard-api.js';
import {
  DASHBOARD_HEADERS_TIMEOUT_MS,
  DASHBOARD_MAX_CONNECTIONS,
  DASHBOARD_REQUEST_TIMEOUT_MS,
  DASHBOARD_TIMEOUT_CHECK_MS,
  startDashboardServer,
  type DashboardData,
  type RunningDashboard,
} from './dashboard-server.js';

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** node:http rather than fetch, which would not send a Host or Origin header of the test's choosing. */
function send(url: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const outgoing = request(url, { method: options.method ?? 'GET', headers: options.headers ?? {} }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
    });
    outgoing.on('error', reject);
    outgoing.end(options.body);
  });
}

function dataOf(allowActions: boolean, requeues: RequeueRequest[], pauses: PauseRequest[] = []): DashboardData {
  return {
    config: {
      allowActions,
      refreshMs: 1_000,
      tables: ['jobs'],
      heartbeatTable: 'tablequeue_brokers',
      schedulesTable: 'tablequeue_schedules',
      queueControlsTable: 'tablequeue_queue_controls',
      database: 'sqlite in memory',
    },
    queues: () => [
      {
        table: 'jobs',
        deadLetter: { kind: 'group', group: 'dead' },
        groups: [{ group: 'emails', ready: 3, delayed: 2, inWork: 1, processed: 0, oldestReadyAgeSeconds: 4 }],
        deadLettered: 2,
        readAt: 0,
        error: null,
        readers: null,
        unindexedRowsInWork: null,
        paused: { wholeTable: false, groups: ['emails'] },
      },
    ],
    throughput: () => [{ at: 0, depth: 6, drainedPerSecond: 0 }],
    deadLetters: () => [{ table: 'jobs', location: 'group:dead', deadLettered: 2, rows: [], error: null }],
    brokers: () => ({ table: 'tablequeue_brokers', brokers: [], staleCount: 0, problem: null }),
    schedules: () => ({ table: 'tablequeue_schedules', schedules: [], problem: null }),
    requeue: (requeue) => {
      if (requeue.toGroup === undefined) return Promise.reject(new DeclarationError('name the group to move them to'));
      requeues.push(requeue);
      return Promise.resolve(requeue.ids?.length ?? 2);
    },
    pause: (pause) => {
      pauses.push(pause);
      return Promise.resolve(pause.paused);
    },
  };
}

const JSON_POST = { method: 'POST', headers: { 'content-type': 'application/json' } };

describe('dashboard server', () => {
  const requeues: RequeueRequest[] = [];
  let readOnly: RunningDashboard;
  let withActions: RunningDashboard;

  beforeAll(async () => {
    [readOnly, withActions] = await Promise.all([
      startDashboardServer({ host: '127.0.0.1', port: 0, data: dataOf(false, []) }),
      startDashboardServer({ host: '127.0.0.1', port: 0, data: dataOf(true, requeues) }),
    ]);
  });

  afterAll(async () => {
    await Promise.all([readOnly.close(), withActions.close()]);
  });

  it('serves the page, its style and script under a policy that allows nothing from elsewhere', async () => {
    const [page, style, script] = await Promise.all(['', 'dashboard.css', 'dashboard.js'].map((path) => send(readOnly.url + path)));
    expect(page!.status).toBe(200);
    expect(page!.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page!.body).toMatch(/<script type="module" src="\/dashboard.js"><\/script>/);
    expect(style!.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(script!.headers['content-type']).toBe('text/javascript; charset=utf-8');
    for (const answer of [page!, style!, script!]) {
      expect(answer.headers['content-security-policy']).toBe(
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      );
      expect(answer.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('answers the JSON endpoints the page polls', async () => {
    const [config, queues, throughput, deadLetters, brokers, schedules] = await Promise.all(
      ['api/config', 'api/queues', 'api/throughput', 'api/dead-letters', 'api/brokers', 'api/schedules'].map((path) => send(readOnly.url + path)),
    );
    expect(JSON.parse(config!.body)).toMatchObject({ allowActions: false, refreshMs: 1_000, tables: ['jobs'] });
    expect(JSON.parse(queues!.body).tables[0].groups[0]).toMatchObject({ group: 'emails', ready: 3, delayed: 2, inWork: 1 });
    expect(JSON.parse(throughput!.body)).toEqual({ intervalMs: 1_000, points: [{ at: 0, depth: 6, drainedPerSecond: 0 }] });
    expect(JSON.parse(deadLetters!.body).tables[0].location).toBe('group:dead');
    expect(JSON.parse(brokers!.body).problem).toBeNull();
    expect(JSON.parse(schedules!.body)).toEqual({ table: 'tablequeue_schedules', schedules: [], problem: null });
  });

  it('pauses and resumes only with --allow-actions, from a JSON body of its own page', async () => {
    const pauses: PauseRequest[] = [];
    const [readOnlyPauses, actions] = await Promise.all([
      startDashboardServer({ host: '127.0.0.1', port: 0, data: dataOf(false, [], pauses) }),
      startDashboardServer({ host: '127.0.0.1', port: 0, data: dataOf(true, [], pauses) }),
    ]);
    try {
      const body = JSON.stringify({ table: 'jobs', group: 'emails', paused: true });
      const refused = await send(`${readOnlyPauses.url}api/pause`, { ...JSON_POST, body });
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body).error).toMatch(/--allow-actions to pause and resume/);
      const paused = await send(`${actions.url}api/pause`, { ...JSON_POST, body });
      expect([paused.status, JSON.parse(paused.body)]).toEqual([200, { paused: true }]);
      const resumed = await send(`${actions.url}api/pause`, { ...JSON_POST, body: JSON.stringify({ table: 'jobs', group: null, paused: false }) });
      expect([resumed.status, JSON.parse(resumed.body)]).toEqual([200, { paused: false }]);
      const form = await send(`${actions.url}api/pause`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body });
      expect(form.status).toBe(415);
      const foreign = await send(`${actions.url}api/pause`, { method: 'POST', headers: { 'content-type': 'application/json', origin: 'http://evil.example' }, body });
      expect(foreign.status).toBe(403);
      const malformed = await send(`${actions.url}api/pause`, { ...JSON_POST, body: JSON.stringify({ table: 'jobs', group: '', paused: 'yes' }) });
      expect(malformed.status).toBe(400);
      expect(pauses).toEqual([
        { table: 'jobs', group: 'emails', paused: true },
        { table: 'jobs', group: null, paused: false },
      ]);
      const queues = await send(`${actions.url}api/queues`);
      expect(JSON.parse(queues.body).tables[0].paused).toEqual({ wholeTable: false, groups: ['emails'] });
    } finally {
      await Promise.all([readOnlyPauses.close(), actions.close()]);
    }
  });

  it('refuses a requeue with 403 when read-only', async () => {
    const answer = await send(`${readOnly.url}api/requeue`, { ...JSON_POST, body: JSON.stringify({ table: 'jobs', toGroup: 'emails' }) });
    expect(answer.status).toBe(403);
    expect(JSON.parse(answer.body).error).toMatch(/--allow-actions/);
  });

  it('requeues with --allow-actions, and refuses what a page elsewhere could send', async () => {
    const moved = await send(`${withActions.url}api/requeue`, {
      ...JSON_POST,
      body: JSON.stringify({ table: 'jobs', ids: ['7'], toGroup: 'emails' }),
    });
    expect(moved.status).toBe(200);
    expect(JSON.parse(moved.body)).toEqual({ moved: 1 });
    expect(requeues).toEqual([{ table: 'jobs', ids: ['7'], toGroup: 'emails' }]);

    const body = JSON.stringify({ table: 'jobs', toGroup: 'emails' });
    const form = await send(`${withActions.url}api/requeue`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body });
    expect(form.status).toBe(415);
    const foreignOrigin = await send(`${withActions.url}api/requeue`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://evil.example' },
      body,
    });
    expect(foreignOrigin.status).toBe(403);
    const rebound = await send(`${withActions.url}api/queues`, { headers: { host: 'evil.example:4300' } });
    expect(rebound.status).toBe(421);
    expect(requeues).toHaveLength(1);
  });

  it('answers 400 for a body it cannot use or a request the data refuses, 404 and 405 elsewhere', async () => {
    const url = `${withActions.url}api/requeue`;
    const [notJson, noTable, badIds, refused, missing, wrongMethod] = await Promise.all([
      send(url, { ...JSON_POST, body: '{' }),
      send(url, { ...JSON_POST, body: JSON.stringify({ ids: ['1'] }) }),
      send(url, { ...JSON_POST, body: JSON.stringify({ table: 'jobs', ids: [1] }) }),
      send(url, { ...JSON_POST, body: JSON.stringify({ table: 'jobs' }) }),
      send(`${withActions.url}api/nothing`),
      send(`${withActions.url}api/queues`, { method: 'DELETE' }),
    ]);
    expect([notJson, noTable, badIds, refused].map((answer) => answer!.status)).toEqual([400, 400, 400, 400]);
    expect(JSON.parse(refused!.body).error).toBe('name the group to move them to');
    expect(missing!.status).toBe(404);
    expect(wrongMethod!.status).toBe(405);
  });
});

/** Where a socket is when the test has waited long enough: closed (with what it was sent) or still open. */
interface SocketEnd {
  readonly closedAfterMs: number | null;
  readonly received: string;
}

/**
 * Opens a raw connection, writes `start`, then one byte of `trickle` every 500 ms, as a client
 * holding the server's sockets would; resolves when the server closes it or after `giveUpMs`.
 */
function holdSocket(url: string, start: string, trickle: string, giveUpMs: number): Promise<SocketEnd> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const openedAt = Date.now();
    let received = '';
    const socket: Socket = connect(Number(port), hostname, () => socket.write(start));
    const dribble = setInterval(() => {
      if (trickle !== '' && !socket.destroyed) socket.write(trickle);
    }, 500);
    const giveUp = setTimeout(() => {
      clearInterval(dribble);
      socket.destroy();
      resolve({ closedAfterMs: null, received });
    }, giveUpMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(dribble);
      clearTimeout(giveUp);
      resolve({ closedAfterMs: Date.now() - openedAt, received });
    });
  });
}

describe('dashboard server limits', () => {
  it('answers only hosts on its list, and checks Origin against the list, not against Host', async () => {
    const requeues: RequeueRequest[] = [];
    const dashboard = await startDashboardServer({ host: '127.0.0.2', port: 0, allowedHosts: ['dash.example'], data: dataOf(true, requeues) });
    try {
      const { port } = new URL(dashboard.url);
      const attacker = `rebind.attacker.example:${port}`;
      const body = JSON.stringify({ table: 'jobs', ids: ['7'], toGroup: 'emails' });
      const rebindHeaders = { host: attacker, origin: `http://${attacker}` };
      const [read, action] = await Promise.all([
        send(`${dashboard.url}api/dead-letters`, { headers: rebindHeaders }),
        send(`${dashboard.url}api/requeue`, { method: 'POST', headers: { ...rebindHeaders, 'content-type': 'application/json' }, body }),
      ]);
      expect(read.status).toBe(421);
      expect(action.status).toBe(421);
      expect(JSON.parse(read.body).error).toMatch(/localhost, 127\.0\.0\.1, \[::1\], dash\.example, 127\.0\.0\.2:\d+; start it with --allowed-host/);

      const ownAddress = await send(`${dashboard.url}api/queues`);
      expect(ownAddress.status).toBe(200);
      const allowed = { host: `dash.example:${port}`, origin: `http://dash.example:${port}` };
      const [allowedRead, allowedAction] = await Promise.all([
        send(`${dashboard.url}api/brokers`, { headers: allowed }),
        send(`${dashboard.url}api/requeue`, { method: 'POST', headers: { ...allowed, 'content-type': 'application/json' }, body }),
      ]);
      expect(allowedRead.status).toBe(200);
      expect(allowedAction.status).toBe(200);
      expect(requeues).toHaveLength(1);

      const foreignOrigin = await send(`${dashboard.url}api/requeue`, {
        method: 'POST',
        headers: { host: `dash.example:${port}`, origin: `http://${attacker}`, 'content-type': 'application/json' },
        body,
      });
      expect(foreignOrigin.status).toBe(403);
      expect(requeues).toHaveLength(1);
    } finally {
      await dashboard.close();
    }
  });

  it('refuses an allowed host that is not one', async () => {
    await expect(startDashboardServer({ host: '127.0.0.1', port: 0, allowedHosts: ['http://dash.example'], data: dataOf(false, []) })).rejects.toThrow(
      DeclarationError,
    );
  });

  it(
    'closes sockets that send their request too slowly, within the header and request timeouts',
    async () => {
      // With actions allowed, so the server waits for the requeue's body rather than refusing at once.
      const dashboard = await startDashboardServer({ host: '127.0.0.1', port: 0, data: dataOf(true, []) });
      try {
        const { host } = new URL(dashboard.url);
        const giveUpMs = DASHBOARD_REQUEST_TIMEOUT_MS + 5 * DASHBOARD_TIMEOUT_CHECK_MS;
        const [silent, slowHeaders, slowBody] = await Promise.all([
          holdSocket(dashboard.url, '', '', giveUpMs),
          holdSocket(dashboard.url, `GET /api/queues HTTP/1.1\r\nHost: ${host}\r\n`, 'X', giveUpMs),
          holdSocket(
            dashboard.url,
            `POST /api/requeue HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
            ' ',
            giveUpMs,
          ),
        ]);
        const headerLimit = DASHBOARD_HEADERS_TIMEOUT_MS + 2 * DASHBOARD_TIMEOUT_CHECK_MS;
        expect(silent.closedAfterMs).not.toBeNull();
        expect(silent.closedAfterMs!).toBeLessThanOrEqual(headerLimit);
        expect(slowHeaders.closedAfterMs).not.toBeNull();
        expect(slowHeaders.closedAfterMs!).toBeLessThanOrEqual(headerLimit);
        expect(slowHeaders.received).toMatch(/^HTTP\/1\.1 408/);
        expect(slowBody.closedAfterMs).not.toBeNull();
        expect(slowBody.closedAfterMs!).toBeLessThanOrEqual(DASHBOARD_REQUEST_TIMEOUT_MS + 2 * DASHBOARD_TIMEOUT_CHECK_MS);
        expect(slowBody.received).toMatch(/^HTTP\/1\.1 408/);
      } finally {
        await dashboard.close();
      }
    },
    DASHBOARD_REQUEST_TIMEOUT_MS + 20_000,
  );

  it('closes connections beyond its cap as they arrive', async () => {
    const dashboard = await startDashboardServer({ host: '127.0.0.1', port: 0, data: dataOf(false, []) });
    const { hostname, port, host } = new URL(dashboard.url);
    const held: Socket[] = [];
    try {
      // Each held connection has had an answer, so the server counts it before the next one comes.
      for (let index = 0; index < DASHBOARD_MAX_CONNECTIONS; index += 1) {
        const socket = connect(Number(port), hostname);
        held.push(socket);
        await new Promise<void>((resolve, reject) => {
          socket.once('error', reject);
          socket.once('data', () => resolve());
          socket.write(`GET /favicon.ico HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
        });
      }
      const extra = await holdSocket(dashboard.url, `GET /api/queues HTTP/1.1\r\nHost: ${host}\r\n\r\n`, '', 2_000);
      expect(extra.closedAfterMs).not.toBeNull();
      expect(extra.received).toBe('');
    } finally {
      for (const socket of held) socket.destroy();
      await dashboard.close();
    }
  });
});

