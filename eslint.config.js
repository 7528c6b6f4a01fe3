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
      // The relay benchmark counts what the stream stored and deletes the stream it made.
      'bench/relay/**',
    ],
    rules: { 'no-restricted-imports': 'off' },
  },
  {
    // The dashboard's page script runs in the browser. Which globals it may name is checked by its
    // own tsconfig (the DOM library, no Node types), as no-undef is off for TypeScript; here, that
    // it stays one file and never turns text into markup or code.
    files: ['src/dashboard/browser/**'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "ImportDeclaration[importKind!='type'], ImportExpression, ExportNamedDeclaration, ExportDefaultDeclaration, ExportAllDeclaration",
          message: 'the page script is the one file the browser loads: it imports types only (from ../dashboard-api.ts) and exports nothing',
        },
      ],
      'no-restricted-properties': [
        'error',
        ...['innerHTML', 'outerHTML', 'insertAdjacentHTML'].map((property) => ({ property, message: 'build elements and text nodes: text from a queue must never become markup' })),
        { object: 'document', property: 'write', message: 'build elements and text nodes: text from a queue must never become markup' },
      ],
      'no-eval': 'error',
      'no-implied-eval': 'error',
      'no-new-func': 'error',
    },
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
