import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a shared server, so a test can take "the destination" down and bring
 * it back without touching the server other tests use. `close()` stops listening and cuts every
 * proxied connection; `reopen()` listens again on the same port.
 */
export class TcpProxy {
  readonly #target: { readonly host: string; readonly port: number };
  readonly #sockets = new Set<Socket>();
  #server: Server | undefined;
  #port = 0;
  /** Connections accepted since the proxy started, across reopenings. */
  acceptedCount = 0;

  private constructor(target: { host: string; port: number }) {
    this.#target = target;
  }

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const proxy = new TcpProxy(target);
    await proxy.reopen();
    return proxy;
  }

  get port(): number {
    return this.#port;
  }

  get isOpen(): boolean {
    return this.#server !== undefined;
  }

  async reopen(): Promise<void> {
    if (this.#server !== undefined) return;
    const server = createServer((client) => this.#accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.#port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #accept(client: Socket): void {
    this.acceptedCount += 1;
    const upstream = connect(this.#target.port, this.#target.host);
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket);
      socket.on('error', () => socket.destroy());
      socket.on('close', () => {
        this.#sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
