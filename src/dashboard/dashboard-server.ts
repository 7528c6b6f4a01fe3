import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DeclarationError, isQueueError } from '../errors.js';
import { HostAllowList } from '../internal/host-allow-list.js';
import type { ScheduleList } from '../admin/schedule-listing.js';
import type { BrokerList } from './broker-directory.js';
import type {
  BrokersBody,
  DashboardConfig,
  DeadLettersBody,
  DeadLetterTableView,
  ErrorAnswer,
  PauseAnswer,
  PauseRequest,
  PausedView,
  QueuesBody,
  RequeueAnswer,
  RequeueRequest,
  SchedulesBody,
  ThroughputBody,
  ThroughputPoint,
} from './dashboard-api.js';
import { DASHBOARD_PAGE } from './dashboard-page.js';
import { loadDashboardScript } from './dashboard-script-loader.js';
import { DASHBOARD_STYLE } from './dashboard-style.js';
import type { TableSnapshot } from './queue-sampler.js';

/**
 * The data behind the endpoints; `dashboard.ts` assembles it from the sampler's latest round.
 * The reads are synchronous on purpose: a request never waits on the database, so any number of
 * them cost the database nothing beyond one round per refresh interval.
 */
export interface DashboardData {
  readonly config: DashboardConfig;
  queues(): readonly (TableSnapshot & { readonly paused: PausedView | null })[];
  throughput(): readonly ThroughputPoint[];
  deadLetters(): readonly DeadLetterTableView[];
  brokers(): BrokerList;
  schedules(): ScheduleList;
  /** Moves dead letters back; returns how many moved. A `DeclarationError` is the caller's to fix (400). */
  requeue(request: RequeueRequest): Promise<number>;
  /** Pauses or resumes a queue; returns whether it is paused now. A `DeclarationError` is the caller's to fix (400). */
  pause(request: PauseRequest): Promise<boolean>;
}

export interface DashboardServerOptions {
  readonly host: string;
  /** 0 picks a free port; `url` tells which. */
  readonly port: number;
  /**
   * Host names the server answers besides loopback names and `host` itself (see
   * `HostAllowList`): `name` on any port or `name:port`.
   */
  readonly allowedHosts?: readonly string[];
  readonly data: DashboardData;
}

export interface RunningDashboard {
  /** `http://host:port/` */
  readonly url: string;
  close(): Promise<void>;
}

/** A requeue names at most this many rows; the page sends one id, or none for all. */
const MAX_REQUEUE_IDS = 1_000;
const MAX_BODY_BYTES = 64 * 1024;

/**
 * How long a client may take over its request. Node's defaults (60 s for the headers, 300 s for
 * the whole request, checked every 30 s) let a client hold a socket for minutes by sending a
 * byte now and then: 3,000 such sockets were held for over 70 s. The page's requests are a line
 * of headers and at most 64 KiB of JSON, sent in milliseconds even over an SSH tunnel, so 5 s
 * for the headers and 10 s for the whole request refuse nobody honest.
 */
export const DASHBOARD_HEADERS_TIMEOUT_MS = 5_000;
export const DASHBOARD_REQUEST_TIMEOUT_MS = 10_000;
/** How often Node looks for requests past those limits; a late one is closed within this much more. */
export const DASHBOARD_TIMEOUT_CHECK_MS = 1_000;
/**
 * An idle kept-alive connection is closed after this long. The page asks again every refresh
 * (2 s by default), so at the default its connections stay open between polls.
 */
export const DASHBOARD_KEEP_ALIVE_TIMEOUT_MS = 5_000;
/**
 * Connections beyond this are closed as they arrive. A page polls four endpoints at once and a
 * browser opens at most six connections to one server, so 100 serves over a dozen open pages;
 * what a connection costs the server is memory only, since no request queries the database.
 */
export const DASHBOARD_MAX_CONNECTIONS = 100;

/**
 * The page may load only its own script and style and talk only to this server, so nothing it
 * renders (a payload, an error text) can pull in anything from elsewhere.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

interface StaticFile {
  readonly type: string;
  readonly body: string;
}

function staticFilesOf(script: string): ReadonlyMap<string, StaticFile> {
  return new Map([
    ['/', { type: 'text/html; charset=utf-8', body: DASHBOARD_PAGE }],
    ['/dashboard.css', { type: 'text/css; charset=utf-8', body: DASHBOARD_STYLE }],
    ['/dashboard.js', { type: 'text/javascript; charset=utf-8', body: script }],
  ]);
}

/** A client error with the status it answers. */
class HttpError extends Error {
  readonly status: number;

  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export async function startDashboardServer(options: DashboardServerOptions): Promise<RunningDashboard> {
  const { data } = options;
  const files = staticFilesOf(await loadDashboardScript());
  const hosts = new HostAllowList({ boundHost: options.host, allowedHosts: options.allowedHosts, optionName: 'allowedHosts' });
  const server = createServer(
    {
      headersTimeout: DASHBOARD_HEADERS_TIMEOUT_MS,
      requestTimeout: DASHBOARD_REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: DASHBOARD_TIMEOUT_CHECK_MS,
      keepAliveTimeout: DASHBOARD_KEEP_ALIVE_TIMEOUT_MS,
    },
    (request, response) => {
      handle(request, response, data, hosts, files).catch((error: unknown) => {
        const status = error instanceof HttpError ? error.status : isQueueError(error, 'DECLARATION') ? 400 : 500;
        sendJson(response, status, { error: error instanceof Error ? error.message : String(error) } satisfies ErrorAnswer);
      });
    },
  );
  server.maxConnections = DASHBOARD_MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function handle(
  request: IncomingMessage,
  response: ServerResponse,
  data: DashboardData,
  hosts: HostAllowList,
  files: ReadonlyMap<string, StaticFile>,
): Promise<void> {
  // A page elsewhere can point a name of its own at this server's address (DNS rebinding); the
  // Host and Origin it sends then name that page's host, which is on no list of ours.
  const localPort = request.socket.localPort ?? 0;
  if (!hosts.allowsHost(request.headers.host, localPort)) {
    throw new HttpError(
      421,
      `the dashboard answers only requests addressed to ${hosts.describe(localPort)}; ` +
        'start it with --allowed-host NAME to add the name you open it by',
    );
  }
  const origin = request.headers.origin;
  if (origin !== undefined && !hosts.allowsOrigin(origin, localPort)) {
    throw new HttpError(403, `requests from pages at ${origin} are refused; the dashboard answers its own page only`);
  }
  const path = new URL(request.url ?? '/', 'http://localhost').pathname;
  if (request.method === 'POST' && path === '/api/requeue') {
    sendJson(response, 200, { moved: await requeue(request, data) } satisfies RequeueAnswer);
    return;
  }
  if (request.method === 'POST' && path === '/api/pause') {
    sendJson(response, 200, { paused: await pause(request, data) } satisfies PauseAnswer);
    return;
  }
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    throw new HttpError(405, `${request.method ?? 'this method'} is not allowed on ${path}`);
  }
  if (path === '/favicon.ico') {
    // The page has no icon; answering at once keeps the browser's console free of a 404.
    response.writeHead(204, { 'cache-control': 'max-age=86400' }).end();
    return;
  }
  const file = files.get(path);
  if (file !== undefined) {
    send(response, 200, file.type, file.body);
    return;
  }
  switch (path) {
    case '/api/config':
      sendJson(response, 200, data.config);
      return;
    case '/api/queues':
      sendJson(response, 200, { tables: data.queues() } satisfies QueuesBody);
      return;
    case '/api/throughput':
      sendJson(response, 200, { intervalMs: data.config.refreshMs, points: data.throughput() } satisfies ThroughputBody);
      return;
    case '/api/dead-letters':
      sendJson(response, 200, { tables: data.deadLetters() } satisfies DeadLettersBody);
      return;
    case '/api/brokers':
      sendJson(response, 200, data.brokers() satisfies BrokersBody);
      return;
    case '/api/schedules':
      sendJson(response, 200, data.schedules() satisfies SchedulesBody);
      return;
  }
  throw new HttpError(404, `nothing at ${path}`);
}

/**
 * Only with `--allow-actions`. The body must be JSON: a page elsewhere can post a form to this
 * server without asking, but not a JSON body, and a browser names its origin, which `handle`
 * has checked against the allowed hosts.
 */
async function requeue(request: IncomingMessage, data: DashboardData): Promise<number> {
  if (!data.config.allowActions) {
    throw new HttpError(403, 'the dashboard is read-only; start it with --allow-actions to requeue dead letters');
  }
  if (!(request.headers['content-type'] ?? '').startsWith('application/json')) {
    throw new HttpError(415, 'send the requeue as application/json');
  }
  return data.requeue(parseRequeue(await readBody(request)));
}

/** Gated as a requeue is: only with `--allow-actions`, and only a JSON body. */
async function pause(request: IncomingMessage, data: DashboardData): Promise<boolean> {
  if (!data.config.allowActions) {
    throw new HttpError(403, 'the dashboard is read-only; start it with --allow-actions to pause and resume queues');
  }
  if (!(request.headers['content-type'] ?? '').startsWith('application/json')) {
    throw new HttpError(415, 'send the pause as application/json');
  }
  return data.pause(parsePause(await readBody(request)));
}

function parsePause(text: string): PauseRequest {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new HttpError(400, 'the pause body is not JSON');
  }
  const { table, group, paused } = (body ?? {}) as Record<string, unknown>;
  if (typeof table !== 'string' || !(group === null || (typeof group === 'string' && group !== '')) || typeof paused !== 'boolean') {
    throw new HttpError(400, 'the pause body must be { table, group, paused }: the table, a group or null for the whole table, and true or false');
  }
  return { table, group, paused };
}

function parseRequeue(text: string): RequeueRequest {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new HttpError(400, 'the requeue body is not JSON');
  }
  if (body === null || typeof body !== 'object') throw new HttpError(400, 'the requeue body must be an object { table, ids?, toGroup? }');
  const { table, ids, toGroup } = body as Record<string, unknown>;
  if (typeof table !== 'string') throw new HttpError(400, 'requeue needs "table", the table whose dead letters to move');
  if (ids !== undefined && (!Array.isArray(ids) || ids.length > MAX_REQUEUE_IDS || ids.some((id) => typeof id !== 'string'))) {
    throw new HttpError(400, `"ids" must be a list of at most ${MAX_REQUEUE_IDS} ids as text`);
  }
  if (toGroup !== undefined && (typeof toGroup !== 'string' || toGroup.length === 0)) {
    throw new DeclarationError('"toGroup" must be the name of a queue');
  }
  return {
    table,
    ...(ids === undefined ? {} : { ids: ids as string[] }),
    ...(toGroup === undefined ? {} : { toGroup }),
  };
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `the request body is over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  send(response, status, 'application/json; charset=utf-8', JSON.stringify(body));
}

function send(response: ServerResponse, status: number, type: string, body: string): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  response.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  });
  response.end(response.req.method === 'HEAD' ? undefined : body);
}
