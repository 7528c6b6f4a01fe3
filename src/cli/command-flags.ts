import { DATABASE_FLAGS, INSPECTOR_FLAGS } from './inspector-flags.js';

/**
 * Every command's flags, in `parseArgs` form: what each command parses, and what every hint the
 * command line prints may name (src/cli/cli-hints.test.ts checks each one against this table).
 */
export const INIT_FLAGS = {
  ...DATABASE_FLAGS,
  table: { type: 'string' },
  schema: { type: 'string' },
  lease: { type: 'boolean' },
  mark: { type: 'boolean' },
  fifo: { type: 'boolean' },
  priority: { type: 'boolean' },
  'partition-key': { type: 'boolean' },
  'dedupe-key': { type: 'boolean' },
  'in-work-index': { type: 'boolean' },
  'no-group': { type: 'boolean' },
  'row-mode': { type: 'boolean' },
  'if-not-exists': { type: 'boolean' },
  schedules: { type: 'boolean' },
  'schedules-table': { type: 'string' },
  'side-tables': { type: 'boolean' },
  print: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const STATS_FLAGS = {
  ...INSPECTOR_FLAGS,
  watch: { type: 'string' },
  json: { type: 'boolean' },
  'heartbeat-table': { type: 'string' },
  'queue-controls-table': { type: 'string' },
} as const;

export const PEEK_FLAGS = {
  ...INSPECTOR_FLAGS,
  group: { type: 'string' },
  'dead-letters': { type: 'boolean' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
} as const;

export const REQUEUE_FLAGS = {
  ...INSPECTOR_FLAGS,
  id: { type: 'string', multiple: true },
  all: { type: 'boolean' },
  'to-group': { type: 'string' },
  'heartbeat-table': { type: 'string' },
  yes: { type: 'boolean' },
} as const;

export const PURGE_FLAGS = { ...INSPECTOR_FLAGS, group: { type: 'string' }, yes: { type: 'boolean' } } as const;

export const PRUNE_FLAGS = {
  ...INSPECTOR_FLAGS,
  'processed-older-than': { type: 'string' },
  'dead-letters-older-than': { type: 'string' },
  'dedupe-windows': { type: 'boolean' },
  'dedupe-windows-table': { type: 'string' },
  batch: { type: 'string' },
  'pause-ms': { type: 'string' },
  'dry-run': { type: 'boolean' },
} as const;

export const DASHBOARD_FLAGS = {
  ...INSPECTOR_FLAGS,
  table: { type: 'string', multiple: true },
  'dead-letter-group': { type: 'string', multiple: true },
  'dead-letter-table': { type: 'string', multiple: true },
  'heartbeat-table': { type: 'string' },
  'schedules-table': { type: 'string' },
  'queue-controls-table': { type: 'string' },
  'allow-actions': { type: 'boolean' },
  port: { type: 'string' },
  host: { type: 'string' },
  'allowed-host': { type: 'string', multiple: true },
  'refresh-ms': { type: 'string' },
} as const;

export const PAUSE_FLAGS = {
  ...DATABASE_FLAGS,
  table: { type: 'string' },
  schema: { type: 'string' },
  queue: { type: 'string' },
  'queue-controls-table': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const CANCEL_FLAGS = {
  ...INSPECTOR_FLAGS,
  queue: { type: 'string' },
  id: { type: 'string' },
  'cancellations-table': { type: 'string' },
} as const;

export const SCHEDULES_FLAGS = {
  ...DATABASE_FLAGS,
  'schedules-table': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const ASYNCAPI_FLAGS = {
  module: { type: 'string' },
  export: { type: 'string' },
  title: { type: 'string' },
  'api-version': { type: 'string' },
  description: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const DEMO_FLAGS = {
  file: { type: 'string' },
  messages: { type: 'string' },
  workers: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The commands by name with their flags. */
export const COMMAND_FLAGS = {
  init: INIT_FLAGS,
  stats: STATS_FLAGS,
  peek: PEEK_FLAGS,
  requeue: REQUEUE_FLAGS,
  purge: PURGE_FLAGS,
  prune: PRUNE_FLAGS,
  dashboard: DASHBOARD_FLAGS,
  schedules: SCHEDULES_FLAGS,
  pause: PAUSE_FLAGS,
  resume: PAUSE_FLAGS,
  cancel: CANCEL_FLAGS,
  asyncapi: ASYNCAPI_FLAGS,
  demo: DEMO_FLAGS,
} as const;
