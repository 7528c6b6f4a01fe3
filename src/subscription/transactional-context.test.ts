import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import { UnsupportedError } from '../errors.js';
import type { HandlerContext } from './subscription-options.js';
import { transactionalContext } from './transactional-context.js';

const queue = defineTable({ table: 'jobs', id: 'id', payload: 'payload' }).queue('jobs');
const tx = { query: async () => [] };

function subscriptionContext(calls: string[]): HandlerContext {
  return {
    query: async () => {
      calls.push('query');
      return [];
    },
    publish: async (_queue, _payload, options) => {
      calls.push(options?.tx === undefined ? 'publish' : 'publish in tx');
      return '1';
    },
    signal: new AbortController().signal,
  };
}

describe('transactionalContext', () => {
  it('adds tx and keeps the pool for queries and publishes when the pool has room', async () => {
    const calls: string[] = [];
    const context = transactionalContext(subscriptionContext(calls), tx, {
      subscription: 'jobs',
      database: 'postgres',
      isPoolOneConnection: false,
    });
    expect(context.tx).toBe(tx);
    await context.query('SELECT 1');
    await context.publish(queue, {});
    expect(calls).toEqual(['query', 'publish']);
  });

  it('refuses what would wait forever for the one connection the delivery holds, naming context.tx', async () => {
    const calls: string[] = [];
    const context = transactionalContext(subscriptionContext(calls), tx, {
      subscription: 'jobs',
      database: 'sqlite',
      isPoolOneConnection: true,
    });
    await expect(context.query('SELECT 1')).rejects.toThrow(UnsupportedError);
    await expect(context.query('SELECT 1')).rejects.toThrow(/use context.tx.query/);
    await expect(context.publish(queue, {})).rejects.toThrow(/\{ tx: context.tx \}/);
    await context.publish(queue, {}, { tx });
    expect(calls).toEqual(['publish in tx']);
  });
});
