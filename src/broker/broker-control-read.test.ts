import { describe, expect, it } from 'vitest';
import { defineTable } from '../definition/define-table.js';
import { createControlReadStatements, type ControlReadTables } from '../dialect/control-read-statements.js';
import { bindControlRead, queueKeysOf } from './broker-control-read.js';

const tables: ControlReadTables = {
  queueControls: { schema: undefined, name: 'tablequeue_queue_controls' },
  cancellations: { schema: undefined, name: 'tablequeue_cancellations' },
};
const grouped = defineTable({ table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until' });
const plain = defineTable({ schema: 'ops', table: 'tasks', id: 'id', lockedUntil: 'locked_until' });

describe("the broker's read of pauses and cancels", () => {
  it("asks for each queue's own row and its table's whole-table row, once each", () => {
    expect(queueKeysOf([grouped.queue('emails'), grouped.queue('sms'), plain.queue('tasks')])).toEqual([
      ['jobs', 'emails'],
      ['jobs', ''],
      ['jobs', 'sms'],
      ['ops.tasks', ''],
    ]);
  });

  it('binds four text arrays on Postgres, one text for any counts', () => {
    const bound = bindControlRead(createControlReadStatements('postgres'), tables, queueKeysOf([grouped.queue('emails')]), [
      ['jobs', '7'],
      ['jobs', '9'],
      ['ops.tasks', '7'],
    ]);
    expect(bound.name).toBe('controlRead.read');
    expect(bound.values).toEqual([['jobs', 'jobs'], ['emails', ''], ['jobs', 'jobs', 'ops.tasks'], ['7', '9', '7']]);
  });

  it('binds a pair per key and per row elsewhere, each list padded with its last pair to a power of two', () => {
    const statements = createControlReadStatements('mariadb');
    const bound = bindControlRead(statements, tables, queueKeysOf([grouped.queue('emails'), plain.queue('tasks')]), [
      ['jobs', '7'],
      ['jobs', '9'],
      ['jobs', '11'],
    ]);
    expect(bound.sql).toBe(statements.read(tables, { queueKeys: 4, inWork: 4 }).sql);
    expect(bound.values).toEqual([
      ...['jobs', 'emails', 'jobs', '', 'ops.tasks', '', 'ops.tasks', ''],
      ...['jobs', '7', 'jobs', '9', 'jobs', '11', 'jobs', '11'],
    ]);
    const pausedOnly = bindControlRead(statements, tables, queueKeysOf([plain.queue('tasks')]), []);
    expect(pausedOnly.sql).toBe(statements.read(tables, { queueKeys: 1, inWork: 0 }).sql);
    expect(pausedOnly.values).toEqual(['ops.tasks', '']);
  });
});
