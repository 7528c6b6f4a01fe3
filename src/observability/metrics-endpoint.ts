import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { DeclarationError } from '../errors.js';
import { HostAllowList } from '../internal/host-allow-list.js';
import { PROMETHEUS_CONTENT_TYPE } from './metric-registry.js';

export const METRICS_PATH = '/metrics';

export interface ServeMetricsOptions {
  /** The port to listen on; 0 picks a free one (read it from the endpoint's `port`). */
  port: number;
  /**
   * The address to listen on. Default `127.0.0.1`, so nothing outside the host can read the
   * metrics until you say so: `0.0.0.0` (or `::`) lets a scraper on another host in.
   */
  host?: string;
  /**
   * Host names the endpoint answers besides `localhost`, `127.0.0.1`, `[::1]` and `host` itself
   * (on the bound port): `name` on any port, or `name:port`. A request whose `Host` header names
   * anything else gets 421, so a web page cannot read the metrics by pointing a name of its own
   * at this address (DNS rebinding). `0.0.0.0` and `::` name no host: list the names or
   * addresses your scrapers use, `['10.0.0.5', 'app.internal:9464']`.
   */
  allowedHosts?: readonly string[];
}

/** A listening `GET /metrics` endpoint; `broker.stop()` closes it too. */
export interface MetricsEndpoint {
  /** `http://host:port/metrics`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** Stops listening and ends open connections; a second call does nothing. */
  close(): Promise<void>;
}

export const DEFAULT_METRICS_HOST = '127.0.0.1';

/** Listens on `host:port` and answers `GET /metrics` with `render()`. */
export async function serveMetrics(options: ServeMetricsOptions, render: () => string): Promise<MetricsEndpoint> {
  if (options === null || typeof options !== 'object') {
    throw new DeclarationError('serveMetrics needs options such as { port: 9464 }');
  }
  const { port } = options;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new DeclarationError(`serveMetrics: port must be a whole number from 0 to 65535, got ${String(port)}`);
  }
  const host = options.host ?? DEFAULT_METRICS_HOST;
  if (typeof host !== 'string' || host === '') {
    throw new DeclarationError(`serveMetrics: host must be an address such as "127.0.0.1" or "0.0.0.0", got ${String(host)}`);
  }
  const hosts = new HostAllowList({ boundHost: host, allowedHosts: options.allowedHosts, optionName: 'serveMetrics: allowedHosts' });
  const server = createServer((request, response) => answer(request, response, render, hosts));
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        new DeclarationError(
          `serveMetrics could not listen on ${host}:${port} (${error.code ?? error.message}); choose another port or host`,
          { cause: error },
        ),
      );
    });
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const boundPort = typeof address === 'object' && address !== null ? address.port : port;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${boundPort}${METRICS_PATH}`,
    host,
    port: boundPort,
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function answer(request: IncomingMessage, response: ServerResponse, render: () => string, hosts: HostAllowList): void {
  const localPort = request.socket.localPort ?? 0;
  if (!hosts.allowsHost(request.headers.host, localPort)) {
    response
      .writeHead(421, { 'Content-Type': 'text/plain; charset=utf-8' })
      .end(`the metrics endpoint answers only requests addressed to ${hosts.describe(localPort)}; add the name your scraper uses to serveMetrics's allowedHosts\n`);
    return;
  }
  const path = (request.url ?? '').split('?', 1)[0];
  if (path !== METRICS_PATH) {
    response.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`not found; metrics are at ${METRICS_PATH}\n`);
    return;
  }
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' }).end('use GET\n');
    return;
  }
  let body: string;
  try {
    body = render();
  } catch (error) {
    response.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`metrics failed: ${(error as Error).message}\n`);
    return;
  }
  response.writeHead(200, { 'Content-Type': PROMETHEUS_CONTENT_TYPE, 'Content-Length': Buffer.byteLength(body) });
  response.end(request.method === 'HEAD' ? undefined : body);
}
