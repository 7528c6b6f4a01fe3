/**
 * A service's module as `tablequeue asyncapi --module` loads it: it declares a broker and never
 * starts it. The URL's user and password are what the command must leave out.
 */
import { Broker } from '../broker/broker.js';
import { defineTable } from '../definition/define-table.js';

const jobs = defineTable({
  table: 'jobs',
  id: 'id',
  group: 'queue',
  payload: 'payload',
  headers: 'headers',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  lockedUntil: 'locked_until',
});

export const emails = jobs.queue('emails');

export const broker = new Broker({ database: 'postgres://fixture-user:fixture-secret@db.internal:6432/orders' });
broker.subscribe(emails, () => undefined, { maxAttempts: 3, deadLetter: 'emails-failed' });

/** Not a broker: the command must tell the two apart. */
export const settings = { retries: 3 };
