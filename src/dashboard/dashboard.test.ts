import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { openDashboard } from './dashboard.js';

describe('openDashboard', () => {
  it('refuses a refresh interval no timer keeps before it opens anything', async () => {
    const opening = openDashboard({ database: 'sqlite::memory:', tables: ['jobs'], refreshMs: 2 ** 31 });
    await expect(opening).rejects.toThrow(DeclarationError);
    await expect(opening).rejects.toThrow(/from 100 to 2147483647, got 2147483648/);
  });
});
