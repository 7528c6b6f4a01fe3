import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCliHere } from './run-cli.fixture.js';

describe('tablequeue demo', { timeout: 60_000 }, () => {
  it('says why messages are retried, tells backlog waits from an idle queue\'s latency, and points at the Quickstart', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'tq-demo-'));
    try {
      const demo = await runCliHere(['demo', '--messages', '500', '--workers', '4', '--file', join(folder, 'queue.db')]);
      expect(demo.stderr).toBe('');
      expect(demo.code).toBe(0);
      expect(demo.stdout).toMatch(/One message in 50 fails its first attempt on purpose/);
      expect(demo.stdout).toMatch(/^handled {5}500 messages in /m);
      expect(demo.stdout).toMatch(/^retries {5}10: one message in 50 failed its first attempt on purpose$/m);
      expect(demo.stdout).toMatch(/^backlog {5}p50 [\d.]+ m?s, p99 [\d.]+ m?s from publish to handler start: the time messages waited$/m);
      expect(demo.stdout).toMatch(/^idle queue {2}p50 [\d.]+ m?s, p99 [\d.]+ m?s from publish to handler start, for 50 messages$/m);
      expect(demo.stdout).toMatch(/Quickstart in README\.md .*examples\/quickstart\.ts/);
      expect(demo.stdout).toMatch(/outbox to NATS JetStream\.\n$/);
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  });
});
