import { describe, expect, it } from 'vitest';
import { columnsPerTable, deadLettersPerTable } from './inspector-flags.js';
import { UsageError } from './usage-error.js';

describe('columnsPerTable', () => {
  it('gives every table the shared ROLE=NAME and one table its own TABLE:ROLE=NAME over them', () => {
    const columns = columnsPerTable(['payload=body', 'outbox:group=name', 'outbox:priority=-', 'audit.jobs:group=topic'], ['jobs', 'outbox', 'audit.jobs']);
    expect(Object.fromEntries(columns)).toEqual({
      jobs: { payload: 'body' },
      outbox: { payload: 'body', group: 'name', priority: null },
      'audit.jobs': { payload: 'body', group: 'topic' },
    });
    expect(columnsPerTable(['jobs:group=topic'], ['jobs', 'outbox']).has('outbox')).toBe(false);
    expect(columnsPerTable(undefined, ['jobs']).size).toBe(0);
  });

  it('refuses a table that is not a --table, a role it does not know, and an id said to be missing', () => {
    expect(() => columnsPerTable(['outbx:group=name'], ['jobs', 'outbox'])).toThrow(UsageError);
    expect(() => columnsPerTable(['outbx:group=name'], ['jobs', 'outbox'])).toThrow(
      '--column outbx:group=name names table "outbx", which is not a --table here ("jobs", "outbox")',
    );
    expect(() => columnsPerTable(['outbox:colour=red'], ['outbox'])).toThrow(/--column takes ROLE=NAME or TABLE:ROLE=NAME with ROLE one of id, group/);
    expect(() => columnsPerTable(['outbox:id=-'], ['outbox'])).toThrow(/every queue table has an id column/);
  });
});

describe('deadLettersPerTable', () => {
  it('gives every table the shared NAME and one table its own TABLE:NAME over it, and leaves out a table nothing is said of', () => {
    const tables = ['jobs', 'outbox', 'audit.jobs'];
    expect(Object.fromEntries(deadLettersPerTable(['failed', 'audit.jobs:audit.dead'], undefined, tables))).toEqual({
      jobs: { kind: 'group', group: 'failed' },
      outbox: { kind: 'group', group: 'failed' },
      'audit.jobs': { kind: 'group', group: 'audit.dead' },
    });
    expect(Object.fromEntries(deadLettersPerTable(['jobs:failed'], ['audit.jobs:audit_dead'], tables))).toEqual({
      jobs: { kind: 'group', group: 'failed' },
      'audit.jobs': { kind: 'table', table: 'audit_dead' },
    });
    expect(deadLettersPerTable(undefined, undefined, tables).size).toBe(0);
  });

  it('reads a colon whose prefix is no --table as part of the group name', () => {
    expect(Object.fromEntries(deadLettersPerTable(['mail:dead'], undefined, ['jobs']))).toEqual({ jobs: { kind: 'group', group: 'mail:dead' } });
  });

  it('refuses two locations for one table, two shared ones, and a TABLE: with no name', () => {
    expect(() => deadLettersPerTable(['jobs:a', 'jobs:b'], undefined, ['jobs'])).toThrow(
      '--dead-letter-group jobs:a and --dead-letter-group jobs:b both say where the dead letters of table "jobs" are; give one',
    );
    expect(() => deadLettersPerTable(['a'], ['b'], ['jobs'])).toThrow(
      '--dead-letter-group a and --dead-letter-table b both say where the dead letters of every table are; give one',
    );
    expect(() => deadLettersPerTable(['jobs:'], undefined, ['jobs'])).toThrow(UsageError);
  });
});
