import { describe, expect, it } from 'vitest';
import { InProcessLockRegistry } from './in-process-lock-registry.js';

describe('InProcessLockRegistry', () => {
  it('lends a key of one database once until it is returned', () => {
    const registry = new InProcessLockRegistry();
    expect(registry.tryLock('/data/queue.db', 'job-1')).toBe(true);
    expect(registry.tryLock('/data/queue.db', 'job-1')).toBe(false);
    expect(registry.tryLock('/data/queue.db', 'job-2')).toBe(true);
    expect(registry.heldCount('/data/queue.db')).toBe(2);
    registry.unlock('/data/queue.db', 'job-1');
    expect(registry.tryLock('/data/queue.db', 'job-1')).toBe(true);
  });

  it('keeps the keys of different databases apart, an in-memory handle being its own database', () => {
    const registry = new InProcessLockRegistry();
    const memoryHandle = {};
    expect(registry.tryLock('/data/queue.db', 'job-1')).toBe(true);
    expect(registry.tryLock(memoryHandle, 'job-1')).toBe(true);
    expect(registry.tryLock({}, 'job-1')).toBe(true);
    registry.unlock(memoryHandle, 'job-1');
    expect(registry.heldCount(memoryHandle)).toBe(0);
    expect(registry.heldCount('/data/queue.db')).toBe(1);
  });

  it('ignores a key that is not held', () => {
    const registry = new InProcessLockRegistry();
    registry.unlock('/data/queue.db', 'job-1');
    expect(registry.heldCount('/data/queue.db')).toBe(0);
  });
});
