import { fork, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { DelayProxy, type ProxyCounts } from './delay-proxy.js';

/** What the benchmark asks the proxy's process, and what it answers. */
type Request = { readonly kind: 'counts'; readonly reset: boolean } | { readonly kind: 'stop' };
type Reply =
  | { readonly kind: 'listening'; readonly port: number }
  | { readonly kind: 'counts'; readonly counts: ProxyCounts; readonly cpuMicroseconds: number };

/** What the proxy counted over a stretch, and the CPU time its process spent then. */
export interface ProxyReading extends ProxyCounts {
  readonly cpuMicroseconds: number;
}

/**
 * A delay proxy in a process of its own: its pacing would otherwise share the benchmark's event
 * loop and be counted in the contenders' CPU time. `read()` returns the counts since the last
 * read (or the start) and starts counting afresh.
 */
export class ProxyProcess {
  readonly #child: ChildProcess;
  readonly port: number;
  readonly oneWayDelayMs: number;

  private constructor(child: ChildProcess, port: number, oneWayDelayMs: number) {
    this.#child = child;
    this.port = port;
    this.oneWayDelayMs = oneWayDelayMs;
  }

  static async start(target: { host: string; port: number }, oneWayDelayMs: number): Promise<ProxyProcess> {
    const script = fileURLToPath(import.meta.url);
    const child = fork(script, [JSON.stringify({ target, oneWayDelayMs })], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const [reply] = (await Promise.race([once(child, 'message'), once(child, 'exit').then(() => [undefined])])) as [Reply | undefined];
    if (reply?.kind !== 'listening') throw new Error('the delay proxy process ended before it listened');
    return new ProxyProcess(child, reply.port, oneWayDelayMs);
  }

  /** A URL to the same server and database through this proxy. */
  urlThrough(url: string): string {
    const proxied = new URL(url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(this.port);
    return proxied.toString();
  }

  async read(): Promise<ProxyReading> {
    const answered = once(this.#child, 'message') as Promise<[Reply]>;
    this.#child.send({ kind: 'counts', reset: true } satisfies Request);
    const [reply] = await answered;
    if (reply.kind !== 'counts') throw new Error(`the delay proxy answered ${reply.kind}`);
    return { ...reply.counts, cpuMicroseconds: reply.cpuMicroseconds };
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    const exited = once(this.#child, 'exit');
    this.#child.send({ kind: 'stop' } satisfies Request);
    await exited;
  }
}

async function serve(order: { target: { host: string; port: number }; oneWayDelayMs: number }): Promise<void> {
  const proxy = await DelayProxy.start(order);
  let cpuAtRead = process.cpuUsage();
  const reply = (message: Reply) => process.send!(message);
  process.on('message', (request: Request) => {
    if (request.kind === 'stop') {
      void proxy.close().then(() => process.exit(0));
      return;
    }
    const cpu = process.cpuUsage(cpuAtRead);
    reply({ kind: 'counts', counts: proxy.counts(), cpuMicroseconds: cpu.user + cpu.system });
    if (request.reset) {
      proxy.resetCounts();
      cpuAtRead = process.cpuUsage();
    }
  });
  // The benchmark's end (or its crash) ends the proxy.
  process.on('disconnect', () => process.exit(0));
  reply({ kind: 'listening', port: proxy.port });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await serve(JSON.parse(process.argv[2]!) as { target: { host: string; port: number }; oneWayDelayMs: number });
