import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCH_DATABASE_NAMES, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL } from './bench-database.js';
import { readCount, readList, UsageError, interruptOnSigint, serversFromEnvironment } from './command-line.js';
import { GROWTH_USAGE, runGrowthCommand } from './growth/growth-command.js';
import { LATENCY_USAGE, runLatencyCommand } from './latency/latency-command.js';
import { describeMachine } from './machine.js';
import { BENCH_FORMS } from './partitioning/bench-table.js';
import { runPartitioningBenchmark, type PartitioningSettings } from './partitioning/partitioning-benchmark.js';
import { formatPartitioningTable } from './partitioning/partitioning-report.js';
import { RELAY_USAGE, runRelayCommand } from './relay/relay-benchmark.js';
import { runRetentionCommand } from './retention/retention-benchmark.js';
import { runEventsCommand } from './events/events-benchmark.js';
import { runControlReadsCommand } from './control-reads/control-reads-benchmark.js';
import { runKeySlotsCommand } from './key-slots/key-slots-benchmark.js';
import { NETWORK_USAGE, runNetworkCommand } from './network/network-command.js';
import { REPORT_USAGE, runReportCommand } from './suite/report-command.js';
import { runSuiteCommand, SUITE_USAGE } from './suite/suite-command.js';

const USAGE = `usage: npm run bench -- partitioning [options]

Drains pre-inserted no-op messages with the tablequeue service and with a raw loop of the same
statements, per database, claim form and worker count, and reports messages per second.

  --messages N          rows per run (default 20000)
  --db LIST             postgres,mariadb,sqlite (default all three)
  --form LIST           rowLock,lease (default both; SQLite has only lease)
  --workers LIST        worker counts (default 1,4,8,16)
  --rounds N            interleaved rounds of service and raw (default 3)
  --timeout-seconds N   each run ends by itself after this long (default 300)
  --output FILE         results as JSON (default bench/results/partitioning.json)

Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}) and MARIADB_URL
(default ${DEFAULT_MARIADB_URL}); both must be on 127.0.0.1. Each run creates its own database
and drops it; SQLite runs use a new file in the temporary directory.`;

const DEFAULT_OUTPUT = fileURLToPath(new URL('./results/partitioning.json', import.meta.url));

async function main(argv: string[]): Promise<number> {
  // Each benchmark reads its own options: the first word names it; without one, the suite runs.
  if (argv[0] === 'latency') return runLatencyCommand(argv);
  if (argv[0] === 'growth') return runGrowthCommand(argv);
  if (argv[0] === 'report') return runReportCommand(argv);
  if (argv[0] === 'retention') return runRetentionCommand(argv);
  if (argv[0] === 'events') return runEventsCommand(argv);
  if (argv[0] === 'control-reads') return runControlReadsCommand(argv);
  if (argv[0] === 'key-slots') return runKeySlotsCommand(argv);
  if (argv[0] === 'network') return runNetworkCommand(argv);
  if (argv[0] === 'relay') return runRelayCommand(argv);
  if (argv[0] !== 'partitioning') return runSuiteCommand(argv);
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      messages: { type: 'string', default: '20000' },
      db: { type: 'string', default: BENCH_DATABASE_NAMES.join(',') },
      form: { type: 'string', default: BENCH_FORMS.join(',') },
      workers: { type: 'string', default: '1,4,8,16' },
      rounds: { type: 'string', default: '3' },
      'timeout-seconds': { type: 'string', default: '300' },
      output: { type: 'string', default: DEFAULT_OUTPUT },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (positionals.length !== 1 || positionals[0] !== 'partitioning') {
    throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  }
  const settings: PartitioningSettings = {
    messages: readCount(values.messages, '--messages', 2),
    databases: readList(values.db, '--db', BENCH_DATABASE_NAMES),
    forms: readList(values.form, '--form', BENCH_FORMS),
    workerCounts: values.workers.split(',').map((item) => readCount(item, '--workers', 1)),
    rounds: readCount(values.rounds, '--rounds', 1),
    runTimeoutMs: readCount(values['timeout-seconds'], '--timeout-seconds', 1) * 1000,
    servers: serversFromEnvironment(),
  };
  const output = resolve(values.output);

  const interrupt = interruptOnSigint();

  const startedAt = new Date();
  const outcome = await runPartitioningBenchmark(settings, interrupt, (line) => console.log(line));
  const results = {
    benchmark: 'partitioning',
    command: `npm run bench -- ${argv.join(' ')}`.trim(),
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    isInterrupted: outcome.isInterrupted,
    settings: {
      messages: settings.messages,
      databases: settings.databases,
      forms: settings.forms,
      workerCounts: settings.workerCounts,
      rounds: settings.rounds,
      runTimeoutMs: settings.runTimeoutMs,
    },
    machine: describeMachine(),
    serverVersions: outcome.serverVersions,
    points: outcome.points,
  };
  await mkdir(dirname(output), { recursive: true });
  await writeFile(output, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\n${formatPartitioningTable(outcome.points)}\n\nresults: ${output}`);
  return outcome.isInterrupted ? 130 : 0;
}

function usageOf(benchmark: string | undefined): string {
  switch (benchmark) {
    case 'latency':
      return LATENCY_USAGE;
    case 'growth':
      return GROWTH_USAGE;
    case 'network':
      return NETWORK_USAGE;
    case 'partitioning':
      return USAGE;
    case 'relay':
      return RELAY_USAGE;
    case 'report':
      return REPORT_USAGE;
    default:
      return SUITE_USAGE;
  }
}

main(process.argv.slice(2)).then(
  (exitCode) => (process.exitCode = exitCode),
  (error: unknown) => {
    if (error instanceof UsageError) console.error(`${error.message}\n\n${usageOf(process.argv[2])}`);
    else console.error(error);
    process.exitCode = 1;
  },
);
