import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Broker } from '../broker/broker.js';
import { defineTable } from '../definition/define-table.js';
import { Outcome } from '../delivery/outcome.js';

export interface DemoOptions {
  readonly file: string | undefined;
  readonly messages: number;
  readonly workers: number;
  readonly output: NodeJS.WriteStream;
}

interface DemoPayload {
  readonly n: number;
  readonly publishedAt: number;
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

/** One message in fifty fails its first attempt, to show retries. */
const FAILING_EVERY = 50;
const PUBLISH_CHUNK = 1_000;

/**
 * Creates an SQLite queue file, publishes messages in chunks while workers drain them, draws a
 * live progress line and ends with a summary: throughput, retries and publish-to-handler latency.
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
    const latenciesMs: number[] = [];
    let handled = 0;
    let retries = 0;
    let firstHandledAt = 0;
    let lastHandledAt = 0;
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    broker.subscribe(
      queue,
      (message) => {
        const now = performance.timeOrigin + performance.now();
        if (message.attempt === 1 && message.payload.n % FAILING_EVERY === 0) {
          retries += 1;
          return Outcome.retry();
        }
        if (message.attempt === 1) latenciesMs.push(now - message.payload.publishedAt);
        firstHandledAt ||= now;
        lastHandledAt = now;
        handled += 1;
        if (handled === options.messages) finish();
        return Outcome.ack();
      },
      { workers: options.workers },
    );
    await broker.start();
    out.write(`tablequeue demo: ${options.messages.toLocaleString('en-US')} messages, ${options.workers} workers, SQLite file ${file}\n`);
    const interactive = out.isTTY === true;
    const progress = setInterval(() => drawProgress(out, handled, options.messages, interactive), interactive ? 100 : 1_000);
    for (let start = 0; start < options.messages; start += PUBLISH_CHUNK) {
      const count = Math.min(PUBLISH_CHUNK, options.messages - start);
      const publishedAt = performance.timeOrigin + performance.now();
      await broker.publishMany(
        queue,
        Array.from({ length: count }, (_, index) => ({ payload: { n: start + index, publishedAt } })),
      );
    }
    await finished;
    clearInterval(progress);
    drawProgress(out, handled, options.messages, interactive);
    out.write('\n');
    await broker.stop();

    const seconds = Math.max(lastHandledAt - firstHandledAt, 1) / 1000;
    latenciesMs.sort((a, b) => a - b);
    out.write(
      [
        `handled     ${handled.toLocaleString('en-US')} messages in ${seconds.toFixed(2)} s (${Math.round(handled / seconds).toLocaleString('en-US')} messages/s)`,
        `retries     ${retries}`,
        `latency     p50 ${percentile(latenciesMs, 0.5).toFixed(1)} ms, p99 ${percentile(latenciesMs, 0.99).toFixed(1)} ms (publish to handler start; messages are published in chunks of ${PUBLISH_CHUNK})`,
        '',
      ].join('\n'),
    );
  } finally {
    if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
  }
}

function drawProgress(out: NodeJS.WriteStream, handled: number, total: number, interactive: boolean): void {
  const width = 30;
  const filled = Math.round((handled / total) * width);
  const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${handled.toLocaleString('en-US')}/${total.toLocaleString('en-US')}`;
  out.write(interactive ? `\r${line}` : `${line}\n`);
}

function percentile(sorted: readonly number[], fraction: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * fraction))]!;
}
