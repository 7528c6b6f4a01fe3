/**
 * Handlers that run on worker threads in the WP-12 tests: each records the message and the
 * thread it ran on through the thread's own pool.
 */
import { threadId } from 'node:worker_threads';
import type { HandlerContext, Message } from '../../src/index.js';

async function record(message: Message<unknown>, context: HandlerContext, sql: string): Promise<void> {
  await context.query(sql, [message.id, message.partitionKey, threadId, Number(message.payload)]);
}

export function recordOnThread(message: Message<unknown>, context: HandlerContext): Promise<void> {
  return record(message, context, 'INSERT INTO effects (message_id, customer, thread_id, n) VALUES (?, ?, ?, ?)');
}

export function recordOnThreadPostgres(message: Message<unknown>, context: HandlerContext): Promise<void> {
  return record(message, context, 'INSERT INTO effects (message_id, customer, thread_id, n) VALUES ($1, $2, $3, $4)');
}

export default recordOnThread;
