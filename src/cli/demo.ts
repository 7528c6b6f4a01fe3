import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Broker } from '../broker/broker.js';
import { defineTable } from '../definition/define-table.js';
import { Outcome } from '../delivery/outcome.js';
import type { OutputStream } from './terminal-output.js';

export interface DemoOptions {
  readonly file: string | undefined;
  readonly messages: number;
  readonly workers: number;
  readonly output: OutputStream;
}

interface DemoPayload {
  readonly n: number;
  readonly publishedAt: number;
  /** Published one at a time into an empty queue, after the backlog drained. */
  readonly isIdleProbe: boolean;
}

const demoJobs = defineTable({
  table: 'demo_jobs',
  id: 'id',
  group: 'queue',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  lockedUntil: 'locked_until',
  payload: 'payload',
});

/** One message in fifty fails its first attempt on purpose, so that the summary shows retries. */
const FAILING_EVERY = 50;
const PUBLISH_CHUNK = 1_000;
/** Messages published one at a time once the backlog is drained, each awaited: an idle queue's latency. */
const IDLE_PROBES = 50;

/**
 * Creates an SQLite queue file, publishes messages in chunks while workers drain them, draws a
 * live progress line, then publishes a few messages one at a time into the empty queue. The
 * summary tells apart the time messages waited in the backlog and the latency of an idle queue,
 * says where the retries come from, and points at the Quickstart and the examples.
 */
export async function runDemo(options: DemoOptions): Promise<void> {
  const folder = options.file === undefined ? mkdtempSync(join(tmpdir(), 'tablequeue-demo-')) : undefined;
  const file = options.file ?? join(folder!, 'queue.db');
  const out = options.output;
  try {
    if (existsSync(file)) throw new Error(`${file} already exists; the demo creates a new queue file`);
    // The broker never creates tables; the demo applies the DDL the way a service's migration would.
    const { default: Database } = await import('better-sqlite3');
    const handle = new Database(file);
    for (const sql of demoJobs.createTableSql('sqlite')) handle.exec(sql);
    handle.close();

    const broker = new Broker({ database: `sqlite:${file}`, pollIntervalMs: 100, leaseMs: 30_000 });
    const queue = demoJobs.queue<DemoPayload>('demo');
    const backlogWaitsMs: number[] = [];
    const idleLatenciesMs: number[] = [];
    let handled = 0;
    let retries = 0;
    let firstHandledAt = 0;
    let lastHandledAt = 0;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    let idleProbeStarted: (() => void) | undefined;
    broker.subscribe(
      queue,
      (message) => {
        const now = performance.timeOrigin + performance.now();
        const { n, publishedAt, isIdleProbe } = message.payload;
        if (isIdleProbe) {
          idleLatenciesMs.push(now - publishedAt);
          idleProbeStarted?.();
          return Outcome.ack();
        }
        if (message.attempt === 1 && n % FAILING_EVERY === 0) {
          retries += 1;
          return Outcome.retry();
        }
        if (message.attempt === 1) backlogWaitsMs.push(now - publishedAt);
        firstHandledAt ||= now;
        lastHandledAt = now;
        handled += 1;
        if (handled === options.messages) finish();
        return Outcome.ack();
      },
      { workers: options.workers },
    );
    await broker.start();
    out.write(
      [
        `tablequeue demo: ${options.messages.toLocaleString('en-US')} messages, ${options.workers} workers, SQLite file ${file}`,
        `One message in ${FAILING_EVERY} fails its first attempt on purpose (its handler returns Outcome.retry()) and is handled on its second.`,
        '',
      ].join('\n'),
    );
    const interactive = out.isTTY === true;
    const progress = setInterval(() => drawProgress(out, handled, options.messages, interactive), interactive ? 100 : 1_000);
    for (let start = 0; start < options.messages; start += PUBLISH_CHUNK) {
      const count = Math.min(PUBLISH_CHUNK, options.messages - start);
      const publishedAt = performance.timeOrigin + performance.now();
      await broker.publishMany(
        queue,
        Array.from({ length: count }, (_, index) => ({ payload: { n: start + index, publishedAt, isIdleProbe: false } })),
      );
    }
    await finished;
    clearInterval(progress);
    drawProgress(out, handled, options.messages, interactive);
    out.write('\n');

    for (let n = 0; n < IDLE_PROBES; n += 1) {
      const started = new Promise<void>((resolve) => (idleProbeStarted = resolve));
      await broker.publish(queue, { n, publishedAt: performance.timeOrigin + performance.now(), isIdleProbe: true });
      await started;
    }
    await broker.stop();

    const seconds = Math.max(lastHandledAt - firstHandledAt, 1) / 1000;
    backlogWaitsMs.sort((a, b) => a - b);
    idleLatenciesMs.sort((a, b) => a - b);
    out.write(
      [
        `handled     ${handled.toLocaleString('en-US')} messages in ${seconds.toFixed(2)} s (${Math.round(handled / seconds).toLocaleString('en-US')} messages/s)`,
        `retries     ${retries.toLocaleString('en-US')}: one message in ${FAILING_EVERY} failed its first attempt on purpose`,
        `backlog     p50 ${formatDuration(percentile(backlogWaitsMs, 0.5))}, p99 ${formatDuration(percentile(backlogWaitsMs, 0.99))} from publish to handler start: the time messages waited`,
        `            in the queue, published in chunks of ${PUBLISH_CHUNK.toLocaleString('en-US')} faster than the workers drained them`,
        `idle queue  p50 ${formatDuration(percentile(idleLatenciesMs, 0.5))}, p99 ${formatDuration(percentile(idleLatenciesMs, 0.99))} from publish to handler start, for ${IDLE_PROBES} messages`,
        '            published one at a time once the queue was empty',
        '',
        'Next: the Quickstart in README.md runs as written (examples/quickstart.ts), and examples/ holds',
        'whole programs for PostgreSQL, MariaDB, transactional handlers and an outbox to NATS JetStream.',
        '',
      ].join('\n'),
    );
  } finally {
    if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
  }
}

function drawProgress(out: OutputStream, handled: number, total: number, interactive: boolean): void {
  const width = 30;
  const filled = Math.round((handled / total) * width);
  const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${handled.toLocaleString('en-US')}/${total.toLocaleString('en-US')}`;
  out.write(interactive ? `\r${line}` : `${line}\n`);
}

function formatDuration(milliseconds: number): string {
  return milliseconds < 1_000 ? `${milliseconds.toFixed(1)} ms` : `${(milliseconds / 1_000).toFixed(2)} s`;
}

function percentile(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))]!;
}
