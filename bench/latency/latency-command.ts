import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCH_DATABASE_NAMES, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL } from '../bench-database.js';
import { readCount, readList, UsageError, interruptOnSigint, serversFromEnvironment } from '../command-line.js';
import { describeMachine } from '../machine.js';
import { BENCH_FORMS } from '../partitioning/bench-table.js';
import { LATENCY_MODES, runLatencyBenchmark, type LatencySettings } from './latency-benchmark.js';
import { formatLatencyTable } from './latency-report.js';

export const LATENCY_USAGE = `usage: npm run bench -- latency [options]

Publishes messages one at a time at a steady rate and records, for each, the time from just
before the publish to the start of its handler: p50, p99 and max per database, claim form, mode
and poll interval. Same process: the subscribing broker publishes. Across processes: a child
process publishes through its own broker.

  --messages N            messages per run (default 2000)
  --interval-ms N         one publish every N ms (default 5)
  --workers N             the subscription's workers (default 4)
  --db LIST               postgres,mariadb,sqlite (default all three)
  --form LIST             rowLock,lease (default both; SQLite has only lease)
  --mode LIST             sameProcess,acrossProcesses (default both)
  --poll-interval-ms LIST the subscriber's pollIntervalMs, a run each (default 1000)
  --timeout-seconds N     each run ends by itself after this long (default 120)
  --output FILE           results as JSON (default bench/results/latency.json)

Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}) and MARIADB_URL
(default ${DEFAULT_MARIADB_URL}); both must be on 127.0.0.1. Each run creates its own database
and drops it; SQLite runs use a new file in the temporary directory.`;

const DEFAULT_OUTPUT = fileURLToPath(new URL('../results/latency.json', import.meta.url));

/** `npm run bench -- latency …`: argv starts with the word "latency". Returns the exit code. */
export async function runLatencyCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      messages: { type: 'string', default: '2000' },
      'interval-ms': { type: 'string', default: '5' },
      workers: { type: 'string', default: '4' },
      db: { type: 'string', default: BENCH_DATABASE_NAMES.join(',') },
      form: { type: 'string', default: BENCH_FORMS.join(',') },
      mode: { type: 'string', default: LATENCY_MODES.join(',') },
      'poll-interval-ms': { type: 'string', default: '1000' },
      'timeout-seconds': { type: 'string', default: '120' },
      output: { type: 'string', default: DEFAULT_OUTPUT },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(LATENCY_USAGE);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  const settings: LatencySettings = {
    messages: readCount(values.messages, '--messages', 1),
    intervalMs: readCount(values['interval-ms'], '--interval-ms', 0),
    workers: readCount(values.workers, '--workers', 1),
    databases: readList(values.db, '--db', BENCH_DATABASE_NAMES),
    forms: readList(values.form, '--form', BENCH_FORMS),
    modes: readList(values.mode, '--mode', LATENCY_MODES),
    pollIntervalsMs: values['poll-interval-ms'].split(',').map((item) => readCount(item, '--poll-interval-ms', 1)),
    runTimeoutMs: readCount(values['timeout-seconds'], '--timeout-seconds', 1) * 1000,
    servers: serversFromEnvironment(),
  };
  const output = resolve(values.output);

  const interrupt = interruptOnSigint();

  const startedAt = new Date();
  const outcome = await runLatencyBenchmark(settings, interrupt, (line) => console.log(line));
  const { servers: _servers, ...recordedSettings } = settings;
  const results = {
    benchmark: 'latency',
    command: `npm run bench -- ${argv.join(' ')}`,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    isInterrupted: outcome.isInterrupted,
    settings: recordedSettings,
    machine: describeMachine(),
    records: outcome.records,
  };
  await mkdir(dirname(output), { recursive: true });
  await writeFile(output, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\n${formatLatencyTable(outcome.records)}\n\nresults: ${output}`);
  const isEveryRunValid = outcome.records.every((record) => record.isValid);
  return outcome.isInterrupted ? 130 : isEveryRunValid ? 0 : 1;
}
