import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import { ClosedError, DeclarationError } from '../errors.js';
import { Broker } from './broker.js';
import { createQueueControlsTableSql, parseQueueControlPayload, queueControlKeyOf, queueControlLabel } from './queue-controls.js';

const grouped = defineTable({ schema: 'app', table: 'jobs', id: 'id', group: 'queue' });
const plain = defineTable({ table: 'reports', id: 'id' });

describe('queue control keys', () => {
  it('name a group, a table without groups, or every queue of a table', () => {
    expect(queueControlKeyOf(grouped.queue('emails'), 'pause')).toEqual({ queueTable: 'app.jobs', queueName: 'emails' });
    expect(queueControlKeyOf(grouped, 'pause')).toEqual({ queueTable: 'app.jobs', queueName: '' });
    expect(queueControlKeyOf(plain.queue('anything'), 'pause')).toEqual({ queueTable: 'reports', queueName: '' });
    expect(queueControlLabel({ queueTable: 'app.jobs', queueName: 'emails' })).toBe('app.jobs/emails');
    expect(queueControlLabel({ queueTable: 'reports', queueName: '' })).toBe('reports');
  });

  it('refuse what is neither a queue nor a table', () => {
    expect(() => queueControlKeyOf('emails' as never, 'broker.pause')).toThrow(DeclarationError);
    expect(() => queueControlKeyOf('emails' as never, 'broker.pause')).toThrow('broker.pause needs a queue (table.queue("name")) or a table from defineTable');
  });

  it('travel in a notification as JSON, and anything else on the channel is ignored', () => {
    expect(parseQueueControlPayload(JSON.stringify(['app.jobs', 'emails']))).toEqual({ queueTable: 'app.jobs', queueName: 'emails' });
    expect(parseQueueControlPayload('emails')).toBeUndefined();
    expect(parseQueueControlPayload('{"table":"jobs"}')).toBeUndefined();
    expect(parseQueueControlPayload('[1, 2]')).toBeUndefined();
  });
});

describe('broker.pause and resume', () => {
  it('need a started broker, and say so', async () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    await expect(broker.pause(grouped.queue('emails'))).rejects.toThrow(ClosedError);
    await expect(broker.resume(grouped)).rejects.toThrow('broker.resume: the broker is not started; await broker.start() first');
    await expect(broker.isPaused(grouped.queue('emails'))).rejects.toThrow(ClosedError);
    await expect(broker.pause({} as never)).rejects.toThrow(DeclarationError);
  });
});

describe('createQueueControlsTableSql', () => {
  it('renders the DDL for a migration, by default of tablequeue_queue_controls', () => {
    expect(createQueueControlsTableSql('mariadb')).toContain('CREATE TABLE IF NOT EXISTS `tablequeue_queue_controls`');
    expect(createQueueControlsTableSql('postgres', 'ops.controls')).toContain('CREATE TABLE IF NOT EXISTS "ops"."controls"');
  });
});
