import { describe, expect, it } from 'vitest';
import { columnsPerTable } from './inspector-flags.js';
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
