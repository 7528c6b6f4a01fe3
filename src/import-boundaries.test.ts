import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SOURCE = fileURLToPath(new URL('.', import.meta.url));

/** Each client library (and worker_threads) may be imported only below these folders. */
const ALLOWED: Record<string, readonly string[]> = {
  pg: ['driver/pg/'],
  mysql2: ['driver/mysql2/'],
  'mysql2/promise': ['driver/mysql2/'],
  'better-sqlite3': ['driver/better-sqlite3/', 'cli/'],
  'node:worker_threads': ['threads/'],
  '@opentelemetry/api': ['observability/'],
  nats: ['outbox/nats/'],
  amqplib: ['outbox/rabbitmq/'],
  // A development dependency: only the dashboard compiles with it, and only when run from the sources.
  typescript: ['dashboard/dashboard-script-loader.ts'],
};

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

describe('import boundaries', () => {
  it('imports client libraries only inside their own driver folder', () => {
    const violations: string[] = [];
    for (const file of sourceFiles(SOURCE)) {
      const path = relative(SOURCE, file);
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(/(?:from\s+|import\()\s*'([^']+)'/g)) {
        const allowed = ALLOWED[match[1]!];
        if (allowed && !allowed.some((folder) => path.startsWith(folder))) violations.push(`${path} imports ${match[1]}`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('keeps dialects free of I/O', () => {
    const offenders = sourceFiles(join(SOURCE, 'dialect')).filter((file) =>
      /from '(node:[^']+|\.\.\/(\.\.\/)?(driver|broker|claim|subscription)\/[^']*)'/.test(readFileSync(file, 'utf8')),
    );
    expect(offenders.map((file) => relative(SOURCE, file))).toEqual([]);
  });
});
