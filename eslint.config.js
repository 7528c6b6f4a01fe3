import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const clientLibraries = ['pg', 'mysql2', 'mysql2/promise', 'better-sqlite3'];

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'bench/node_modules/', 'examples/dist/', 'examples/node_modules/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...clientLibraries.map((name) => ({
              name,
              message: 'client libraries are imported only inside their own src/driver/<name>/ folder',
            })),
            { name: 'node:worker_threads', message: 'worker threads belong to src/threads/' },
            { name: 'nats', message: 'nats is imported only inside src/outbox/nats/' },
            { name: 'amqplib', message: 'amqplib is imported only inside src/outbox/rabbitmq/' },
            { name: '@opentelemetry/api', message: '@opentelemetry/api is imported only inside src/observability/' },
          ],
        },
      ],
    },
  },
  {
    files: [
      'src/driver/pg/**',
      'src/driver/mysql2/**',
      'src/driver/better-sqlite3/**',
      'src/outbox/nats/**',
      'src/outbox/rabbitmq/**',
      'src/observability/**',
      'conformance/**',
      'src/threads/**',
      'src/cli/**',
      'chaos/**',
      'examples/**',
    ],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    files: ['src/dialect/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/driver/**', '**/broker/**', '**/claim/**', '**/subscription/**', 'node:*'], message: 'dialects are pure SQL text: no I/O and no runtime modules' }] },
      ],
    },
  },
);
