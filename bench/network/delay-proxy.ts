import { createServer, connect, type Server, type Socket } from 'node:net';

/** What the proxy counted since it started or since the last `resetCounts()`. */
export interface ProxyCounts {
  /** Connections accepted. */
  readonly connections: number;
  /**
   * Round trips started by clients: a chunk from a client that arrives when that connection's
   * last chunk went the other way (or is its first). Statements pipelined before any answer
   * count once, as they cost one round trip.
   */
  readonly clientTurns: number;
  readonly bytesToServer: number;
  readonly bytesToClient: number;
  /** Writes that found a destination's buffer full, so the chunks behind them waited (backpressure). */
  readonly backpressureWaits: number;
}

interface HeldChunk {
  readonly bytes: Buffer;
  /** `performance.now()` when it may be written on. */
  readonly dueAt: number;
}

/** A source's reads stop while this many bytes wait in its direction's queue, and resume below half. */
const HIGH_WATER_BYTES = 1 << 20;
/**
 * Node's timers run on a millisecond clock and often fire a millisecond late: too coarse for a
 * quarter of a millisecond each way. A chunk due sooner than this is paced by short blocking
 * sleeps between turns of the event loop instead of a timer.
 */
const TIMER_FLOOR_MS = 2;
/**
 * The longest blocking sleep between two turns of the event loop while a chunk is due soon. A
 * chunk that arrives during one is read, and stamped, up to this late. Without the sleep the
 * pacing would spin and hold a core whenever anything is in flight; an idle proxy does not
 * pace at all, it waits on its sockets.
 */
const PACING_SLEEP_MS = 0.05;

/**
 * The sleep while the next chunk is still more than a millisecond off: longer sleeps there wake
 * the proxy less often (at 2 and 5 ms round trips the pacing took 0.3 to 0.4 of a core with 50 µs
 * sleeps throughout), and what arrives meanwhile waits at most this long to be stamped.
 */
const FAR_PACING_SLEEP_MS = 0.2;
/**
 * A sleep wakes late by the kernel's timer slack (about 50 µs): within this much of a chunk's due
 * time the pacing turns without sleeping, so the chunk leaves on time rather than a slack late.
 */
const SPIN_MS = 0.1;

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/**
 * One direction of one proxied connection: chunks read from `source` wait in arrival order until
 * `delayMs` after they were read, then go to `destination` in that order. A destination whose
 * buffer is full holds the whole queue until it drains, and a queue past the high-water mark
 * pauses its source, so a slow reader slows its writer as it would without the proxy.
 */
class DelayedDirection {
  readonly #source: Socket;
  readonly #destination: Socket;
  readonly #delayMs: number;
  readonly #proxy: DelayProxy;
  readonly #onChunk: (bytes: Buffer) => void;
  readonly #queue: HeldChunk[] = [];
  #queuedBytes = 0;
  #isWaitingForDrain = false;
  #isSourceEnded = false;

  constructor(options: { source: Socket; destination: Socket; delayMs: number; proxy: DelayProxy; onChunk: (bytes: Buffer) => void }) {
    this.#source = options.source;
    this.#destination = options.destination;
    this.#delayMs = options.delayMs;
    this.#proxy = options.proxy;
    this.#onChunk = options.onChunk;
    this.#source.on('data', (bytes: Buffer) => this.#receive(bytes));
    this.#source.on('end', () => {
      this.#isSourceEnded = true;
      this.#endWhenEmpty();
    });
    this.#destination.on('drain', () => {
      this.#isWaitingForDrain = false;
      this.flushDue(performance.now());
      this.#proxy.schedule();
    });
  }

  /** When the oldest held chunk is due; undefined when none waits or the destination is full. */
  get nextDueAt(): number | undefined {
    return this.#isWaitingForDrain ? undefined : this.#queue[0]?.dueAt;
  }

  /** Writes every chunk due by `now`, oldest first, until the destination's buffer fills. */
  flushDue(now: number): void {
    while (!this.#isWaitingForDrain && this.#queue.length > 0 && this.#queue[0]!.dueAt <= now) {
      const chunk = this.#queue.shift()!;
      this.#queuedBytes -= chunk.bytes.length;
      this.#write(chunk.bytes);
    }
    if (this.#source.isPaused() && this.#queuedBytes < HIGH_WATER_BYTES / 2) this.#source.resume();
    this.#endWhenEmpty();
  }

  #receive(bytes: Buffer): void {
    this.#onChunk(bytes);
    if (this.#delayMs === 0 && this.#queue.length === 0 && !this.#isWaitingForDrain) {
      // No delay asked: written on at once, so only the proxy's own cost is added.
      this.#write(bytes);
      return;
    }
    this.#queue.push({ bytes, dueAt: performance.now() + this.#delayMs });
    this.#queuedBytes += bytes.length;
    if (this.#queuedBytes >= HIGH_WATER_BYTES) this.#source.pause();
    this.#proxy.schedule();
  }

  #write(bytes: Buffer): void {
    if (this.#destination.destroyed) return;
    if (!this.#destination.write(bytes)) {
      this.#isWaitingForDrain = true;
      this.#proxy.countBackpressureWait();
    }
  }

  #endWhenEmpty(): void {
    if (this.#isSourceEnded && this.#queue.length === 0 && !this.#destination.writableEnded) this.#destination.end();
  }
}

/**
 * A TCP proxy on 127.0.0.1 that holds every chunk for `oneWayDelayMs` in each direction, so a
 * server on this machine answers as if it were `2 × oneWayDelayMs` of round trip away (the
 * kernel's delay emulation is not available everywhere). Order within a direction is kept; the
 * two directions of a connection, and connections, are delayed independently. Half-closes are
 * passed on after what came before them.
 */
export class DelayProxy {
  readonly #target: { readonly host: string; readonly port: number };
  readonly #oneWayDelayMs: number;
  readonly #sockets = new Set<Socket>();
  readonly #directions = new Set<DelayedDirection>();
  #server: Server | undefined;
  #port = 0;
  #timer: NodeJS.Timeout | undefined;
  #isPacing = false;
  #counts = DelayProxy.#noCounts();

  private constructor(target: { host: string; port: number }, oneWayDelayMs: number) {
    this.#target = target;
    this.#oneWayDelayMs = oneWayDelayMs;
  }

  static async start(options: { target: { host: string; port: number }; oneWayDelayMs: number; port?: number }): Promise<DelayProxy> {
    if (!(options.oneWayDelayMs >= 0)) throw new RangeError(`oneWayDelayMs must be 0 or more; got ${options.oneWayDelayMs}`);
    const proxy = new DelayProxy(options.target, options.oneWayDelayMs);
    const server = createServer({ allowHalfOpen: true }, (client) => proxy.#accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    proxy.#port = (server.address() as { port: number }).port;
    proxy.#server = server;
    return proxy;
  }

  get port(): number {
    return this.#port;
  }

  get oneWayDelayMs(): number {
    return this.#oneWayDelayMs;
  }

  counts(): ProxyCounts {
    return { ...this.#counts };
  }

  resetCounts(): void {
    this.#counts = DelayProxy.#noCounts();
  }

  /** Stops listening and cuts every proxied connection. */
  async close(): Promise<void> {
    clearTimeout(this.#timer);
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    this.#directions.clear();
    const server = this.#server;
    this.#server = undefined;
    if (server !== undefined) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  countBackpressureWait(): void {
    this.#counts.backpressureWaits += 1;
  }

  /**
   * Makes sure the earliest held chunk of any direction is written when due: a timer when it is
   * far enough off for the millisecond clock, pacing turns otherwise.
   */
  schedule(): void {
    if (this.#isPacing) return;
    const nextDueAt = this.#nextDueAt();
    if (nextDueAt === undefined) return;
    clearTimeout(this.#timer);
    const wait = nextDueAt - performance.now();
    if (wait >= TIMER_FLOOR_MS) {
      // A timer fires up to a millisecond late: it is set a millisecond early and pacing covers the rest.
      this.#timer = setTimeout(() => this.#pace(), Math.floor(wait) - 1);
    } else {
      this.#isPacing = true;
      setImmediate(() => this.#pace());
    }
  }

  #pace(): void {
    this.#isPacing = false;
    const now = performance.now();
    for (const direction of this.#directions) direction.flushDue(now);
    const nextDueAt = this.#nextDueAt();
    if (nextDueAt === undefined) return;
    const wait = nextDueAt - performance.now();
    if (wait >= TIMER_FLOOR_MS) {
      this.schedule();
      return;
    }
    // A short blocking sleep, then one turn of the event loop (which reads, and stamps, what
    // arrived meanwhile) before the next look.
    const sleep = Math.min(wait - SPIN_MS, wait > 1 ? FAR_PACING_SLEEP_MS : PACING_SLEEP_MS);
    if (sleep > 0) Atomics.wait(sleeper, 0, 0, sleep);
    this.#isPacing = true;
    setImmediate(() => this.#pace());
  }

  #nextDueAt(): number | undefined {
    let earliest: number | undefined;
    for (const direction of this.#directions) {
      const dueAt = direction.nextDueAt;
      if (dueAt !== undefined && (earliest === undefined || dueAt < earliest)) earliest = dueAt;
    }
    return earliest;
  }

  #accept(client: Socket): void {
    this.#counts.connections += 1;
    const server = connect({ port: this.#target.port, host: this.#target.host, allowHalfOpen: true });
    client.setNoDelay(true);
    server.setNoDelay(true);
    // Which way this connection's last chunk went: a client chunk after a server chunk starts a round trip.
    let lastFrom: 'client' | 'server' = 'server';
    const toServer = new DelayedDirection({
      source: client,
      destination: server,
      delayMs: this.#oneWayDelayMs,
      proxy: this,
      onChunk: (bytes) => {
        if (lastFrom === 'server') this.#counts.clientTurns += 1;
        lastFrom = 'client';
        this.#counts.bytesToServer += bytes.length;
      },
    });
    const toClient = new DelayedDirection({
      source: server,
      destination: client,
      delayMs: this.#oneWayDelayMs,
      proxy: this,
      onChunk: (bytes) => {
        lastFrom = 'server';
        this.#counts.bytesToClient += bytes.length;
      },
    });
    this.#directions.add(toServer).add(toClient);
    // Each side closes once both its halves ended (ends are passed on in order) or on an error,
    // which cuts the other side too.
    const cut = () => {
      client.destroy();
      server.destroy();
      this.#directions.delete(toServer);
      this.#directions.delete(toClient);
      this.#sockets.delete(client);
      this.#sockets.delete(server);
    };
    for (const socket of [client, server]) {
      this.#sockets.add(socket);
      socket.on('error', cut);
      socket.on('close', cut);
    }
  }

  static #noCounts(): { -readonly [Key in keyof ProxyCounts]: ProxyCounts[Key] } {
    return { connections: 0, clientTurns: 0, bytesToServer: 0, bytesToClient: 0, backpressureWaits: 0 };
  }
}
