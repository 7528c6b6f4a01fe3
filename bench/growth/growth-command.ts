import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCH_DATABASE_NAMES, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL } from '../bench-database.js';
import { interruptOnSigint, readCount, readList, serversFromEnvironment, UsageError } from '../command-line.js';
import { describeMachine } from '../machine.js';
import { INSTALL_COMMAND, peerInstallProblems } from '../peers/peer-packages.js';
import { GROWTH_PARTS, runGrowth, type GrowthSettings } from './growth-benchmark.js';
import { renderGrowthChart } from './growth-chart.js';
import { growthContenders } from './growth-contenders.js';
import { formatGrowthMarkdown, type GrowthResults } from './growth-report.js';

export const GROWTH_USAGE = `usage: npm run bench -- growth [options]

How throughput and the claim statement's time move as the work grows, tablequeue (lease form at
its defaults, with prefetch 500, and with a batch handler of 100) against the peers (graphile-
worker at its defaults and with its local queue, pg-boss in batch mode, plainjob), each point
once on a fresh database whose table is filled on the server side (INSERT … SELECT over a
generated series), then drained by the contender for its first --first messages, timed; then
tablequeue drains as many again while a probe times the table's own claim statement four times a
second (PostgreSQL: EXPLAIN ANALYZE BUFFERS).

Parts (--parts):
  drain     backlogs of due rows (--backlogs)
  delayed   the same with --delayed rows due a day ahead in the same table
  groups    one queue's rows drained among --group-rows rows of --groups queues in one table,
            against that queue's rows alone (tablequeue only)
  fifo      one FIFO group of each backlog (up to --largest-elsewhere), its first --fifo-first
            messages drained (tablequeue at its lease defaults alone)
  publish   publish one at a time and publishMany into tables already holding 0 and --backlogs rows
  latency   PostgreSQL: publish-to-handler latency across processes while --latency-backlog rows
            drain in another queue of the same table, against an empty one

  --db LIST                postgres,mariadb,sqlite (default all three)
  --parts LIST             (default all: ${GROWTH_PARTS.join(',')})
  --backlogs LIST          due rows (default 10000,100000,1000000,10000000; above a million
                           PostgreSQL and tablequeue only; peers at their defaults up to 100000)
  --largest-elsewhere N    the largest backlog on MariaDB and SQLite (default 1000000)
  --first N                messages timed per drain (default 50000)
  --workers N              workers on PostgreSQL and MariaDB (default 16; SQLite 4)
  --delayed N              (default 1000000)
  --groups N               (default 1000)
  --group-rows N           (default 1000000)
  --fifo-first N           (default 2000)
  --publish-one N          (default 2000)
  --publish-many N         (default 50000)
  --latency-messages N     (default 1000)
  --latency-interval-ms N  (default 20)
  --latency-backlog N      (default 1000000)
  --only LIST              contender ids (see --list)
  --storage TEXT           PostgreSQL storage parameters set on tablequeue's tables before the
                           fill, e.g. "fillfactor=90": a change of the DDL tried before it is made
  --timeout-seconds N      each point ends by itself after this long (default 1800)
  --output FILE            results as JSON (default bench/results/growth.json)
  --chart FILE             the SVG (default docs/benchmarks-growth.svg)
  --report FILES           print the tables and draw the chart from results files (a comma-
                           separated list: runs cut by database or part, reported together), run nothing
  --list                   print the contenders and exit

Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}) and MARIADB_URL
(default ${DEFAULT_MARIADB_URL}); both must be on 127.0.0.1.`;

const DEFAULT_OUTPUT = fileURLToPath(new URL('../results/growth.json', import.meta.url));
const DEFAULT_CHART = fileURLToPath(new URL('../../docs/benchmarks-growth.svg', import.meta.url));

export async function runGrowthCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      db: { type: 'string', default: BENCH_DATABASE_NAMES.join(',') },
      parts: { type: 'string', default: GROWTH_PARTS.join(',') },
      backlogs: { type: 'string', default: '10000,100000,1000000,10000000' },
      'largest-elsewhere': { type: 'string', default: '1000000' },
      first: { type: 'string', default: '50000' },
      workers: { type: 'string', default: '16' },
      delayed: { type: 'string', default: '1000000' },
      groups: { type: 'string', default: '1000' },
      'group-rows': { type: 'string', default: '1000000' },
      'fifo-first': { type: 'string', default: '2000' },
      'publish-one': { type: 'string', default: '2000' },
      'publish-many': { type: 'string', default: '50000' },
      'latency-messages': { type: 'string', default: '1000' },
      'latency-interval-ms': { type: 'string', default: '20' },
      'latency-backlog': { type: 'string', default: '1000000' },
      only: { type: 'string' },
      storage: { type: 'string' },
      'timeout-seconds': { type: 'string', default: '1800' },
      output: { type: 'string', default: DEFAULT_OUTPUT },
      chart: { type: 'string', default: DEFAULT_CHART },
      report: { type: 'string' },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(GROWTH_USAGE);
    return 0;
  }
  const extra = positionals.filter((word) => word !== 'growth');
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
  const chart = resolve(values.chart);
  if (values.report !== undefined) {
    const files = await Promise.all(values.report.split(',').map(async (file) => JSON.parse(await readFile(resolve(file), 'utf8')) as GrowthResults));
    await writeOutputs(mergeResults(files), undefined, chart);
    return 0;
  }
  const every = growthContenders();
  if (values.list) {
    for (const contender of every) console.log(`${contender.id.padEnd(32)} ${contender.label} (${contender.databases.join(', ')})`);
    return 0;
  }
  const contenders = values.only === undefined ? every : readList(values.only, '--only', every.map((contender) => contender.id)).map((id) => every.find((contender) => contender.id === id)!);
  if (contenders.some((contender) => contender.kind === 'peer')) {
    const problems = peerInstallProblems();
    if (problems.length > 0) {
      console.error(`the peers are not installed as bench/package.json asks:\n${problems.map((problem) => `  - ${problem}`).join('\n')}\ninstall them with:\n  ${INSTALL_COMMAND}\nor leave them out with --only`);
      return 1;
    }
  }
  const workers = readCount(values.workers, '--workers', 1);
  if (values.storage !== undefined && values.db !== 'postgres') throw new UsageError('--storage sets PostgreSQL storage parameters: run it with --db postgres');
  const settings: GrowthSettings = {
    databases: readList(values.db, '--db', BENCH_DATABASE_NAMES),
    parts: readList(values.parts, '--parts', GROWTH_PARTS),
    backlogs: values.backlogs.split(',').map((item) => readCount(item, '--backlogs', 1)),
    largestBacklogBesidesPostgres: readCount(values['largest-elsewhere'], '--largest-elsewhere', 1),
    first: readCount(values.first, '--first', 2),
    workerCounts: { postgres: workers, mariadb: workers, sqlite: 4 },
    delayedRows: readCount(values.delayed, '--delayed', 0),
    groups: readCount(values.groups, '--groups', 2),
    groupRows: readCount(values['group-rows'], '--group-rows', 2),
    fifoFirst: readCount(values['fifo-first'], '--fifo-first', 1),
    publishOne: readCount(values['publish-one'], '--publish-one', 1),
    publishMany: readCount(values['publish-many'], '--publish-many', 1),
    latencyMessages: readCount(values['latency-messages'], '--latency-messages', 1),
    latencyIntervalMs: readCount(values['latency-interval-ms'], '--latency-interval-ms', 1),
    latencyBacklog: readCount(values['latency-backlog'], '--latency-backlog', 1),
    contenders,
    storage: values.storage,
    runTimeoutMs: readCount(values['timeout-seconds'], '--timeout-seconds', 1) * 1000,
    servers: serversFromEnvironment(),
  };
  const interrupt = interruptOnSigint();
  const startedAt = new Date();
  const machine = describeMachine();
  const output = resolve(values.output);
  const outcome = await runGrowth(settings, interrupt, (line) => console.log(line));
  const results: GrowthResults = {
      benchmark: 'growth',
      command: `npm run bench -- ${argv.join(' ')}`,
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      isInterrupted: outcome.isInterrupted,
      settings: { ...settingsToRecord(settings), contenders: settings.contenders.map((contender) => contender.id) },
      machine,
      loadAverageAtEnd: describeMachine().loadAverage,
      drains: outcome.drains,
      publishes: outcome.publishes,
      latencies: outcome.latencies,
  };
  await mkdir(dirname(output), { recursive: true });
  await writeFile(output, `${JSON.stringify(results, null, 2)}\n`);
  await writeOutputs(results, output, chart);
  return outcome.isInterrupted ? 130 : 0;
}

/** The settings as the results file records them: everything but the contenders' code and the servers' addresses. */
function settingsToRecord(settings: GrowthSettings): Omit<GrowthSettings, 'contenders' | 'servers'> {
  const recorded = Object.entries(settings).filter(([key]) => key !== 'contenders' && key !== 'servers');
  return Object.fromEntries(recorded) as Omit<GrowthSettings, 'contenders' | 'servers'>;
}

async function writeOutputs(results: GrowthResults, output: string | undefined, chart: string): Promise<void> {
  await mkdir(dirname(chart), { recursive: true });
  await writeFile(chart, renderGrowthChart(results));
  console.log(`\n${formatGrowthMarkdown(results)}\n`);
  if (output !== undefined) console.log(`results: ${output}`);
  console.log(`chart: ${chart}`);
}

/**
 * Several runs (one per database or part, when a whole run would not fit in one sitting) as one:
 * their points together, the first run's settings and machine, the earliest start and latest end.
 */
function mergeResults(files: readonly GrowthResults[]): GrowthResults {
  const [first, ...rest] = files;
  if (first === undefined) throw new UsageError('--report: name at least one results file');
  return rest.reduce<GrowthResults>(
    (merged, file) => ({
      ...merged,
      command: `${merged.command}; ${file.command}`,
      startedAt: file.startedAt < merged.startedAt ? file.startedAt : merged.startedAt,
      finishedAt: file.finishedAt > merged.finishedAt ? file.finishedAt : merged.finishedAt,
      isInterrupted: merged.isInterrupted || file.isInterrupted,
      loadAverageAtEnd: file.loadAverageAtEnd,
      drains: [...merged.drains, ...file.drains],
      publishes: [...merged.publishes, ...file.publishes],
      latencies: [...merged.latencies, ...file.latencies],
    }),
    first,
  );
}
