import { describe, expect, it } from 'vitest';
import { UnsupportedError } from '../errors.js';
import { openQueueInspector } from './open-queue-inspector.js';

describe('openQueueInspector', () => {
  it('refuses a pooler declared for a database that is not PostgreSQL before it connects', async () => {
    const opening = openQueueInspector({ database: 'mysql://nowhere.invalid/app', table: 'jobs', pooler: 'session' });
    await expect(opening).rejects.toThrow(UnsupportedError);
    await expect(opening).rejects.toThrow(/^pooler is for PostgreSQL poolers such as PgBouncer, and the database is mysql at nowhere\.invalid:3306; remove it$/);
  });
});
