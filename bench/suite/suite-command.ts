import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCH_DATABASE_NAMES, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL, type BenchDatabaseName } from '../bench-database.js';
import { interruptOnSigint, readCount, readList, serversFromEnvironment, UsageError } from '../command-line.js';
import { describeMachine } from '../machine.js';
import { bullMqContender } from '../peers/bullmq-drain.js';
import { graphileWorkerContenders } from '../peers/graphile-worker-drain.js';
import { INSTALL_COMMAND, installedVersion, PEER_PACKAGES, peerInstallProblems } from '../peers/peer-packages.js';
import { pgBossContender } from '../peers/pg-boss-drain.js';
import { plainjobContenders } from '../peers/plainjob-drain.js';
import { findCoalescingSwitch } from './coalescing.js';
import type { Contender } from './contender.js';
import { libraryContenders } from './library-contenders.js';
import { PUBLISH_WAYS, runSuite, type PublishWay, type SuiteSettings } from './suite-benchmark.js';
import { formatSuiteText, type SuiteResults } from './suite-report.js';

/**
 * The sections `--only` can name besides contenders and their kinds. `publish.keyed` is a part of
 * `publish`: the keyed publishes and the plain service publishes they are held against.
 */
const SECTIONS = ['drain', 'publish', 'publish.keyed', 'memory'] as const;
const KINDS = ['service', 'raw', 'peer'] as const;

export const SUITE_USAGE = `usage: npm run bench [-- options]

The suite: tablequeue against its peers and against raw loops of its own statements, in the
same run on the same databases. Per database, worker count and round, every contender drains
N pre-inserted no-op messages on a fresh database (timed from the first handled message to the
last); then publish throughput per database, plain and keyed; then RSS while draining many
rows on PostgreSQL.
Peers: pg-boss, graphile-worker and BullMQ on PostgreSQL, plainjob on SQLite.

  --messages N          messages per drain, rows per publishMany run and per run of 64
                        callers publishing at once (default 20000)
  --db LIST             postgres,mariadb,sqlite (default all three)
  --workers LIST        worker counts for every database (default: 16 on PostgreSQL and
                        MariaDB, 4 on SQLite, the points the aims name; the full matrix
                        is --workers 1,4,16)
  --rounds N            interleaved rounds (default 3)
  --only LIST           what to run: drain, publish, memory; service, raw, peer; or contender
                        names such as service.lease, raw.leaseBatch, peer.bullmq (default all);
                        publish.keyed: only the keyed publishes and the plain ones beside them
  --publish-one N       rows published one at a time per publish run (default 2000)
  --memory-rows N       rows of the memory drain (default 200000; the flatness check is meant for 1000000)
  --memory-workers N    workers of the memory drain (default 16)
  --timeout-seconds N   each run ends by itself after this long (default 300)
  --output FILE         results as JSON (default bench/results/suite.json)
  --list                print the contenders and exit

The other benchmarks: npm run bench -- partitioning --help, npm run bench -- latency --help,
npm run bench -- growth --help (cost against the backlog, 10,000 to 10,000,000 rows), and
npm run bench -- report [FILE] (tables and the SVG chart from a results file).

The peers are dev dependencies of the bench package: install them once with
${INSTALL_COMMAND}
Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}) and MARIADB_URL
(default ${DEFAULT_MARIADB_URL}); both must be on 127.0.0.1. Each run creates its own database
and drops it; SQLite runs use a new file in the temporary directory.`;

const DEFAULT_OUTPUT = fileURLToPath(new URL('../results/suite.json', import.meta.url));

/** `npm run bench` with no benchmark named, or `npm run bench -- suite …`. Returns the exit code. */
export async function runSuiteCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      messages: { type: 'string', default: '20000' },
      db: { type: 'string', default: BENCH_DATABASE_NAMES.join(',') },
      workers: { type: 'string' },
      rounds: { type: 'string', default: '3' },
      only: { type: 'string' },
      'publish-one': { type: 'string', default: '2000' },
      'memory-rows': { type: 'string', default: '200000' },
      'memory-workers': { type: 'string', default: '16' },
      'timeout-seconds': { type: 'string', default: '300' },
      output: { type: 'string', default: DEFAULT_OUTPUT },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(SUITE_USAGE);
    return 0;
  }
  const extra = positionals.filter((word) => word !== 'suite');
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);

  const problems = peerInstallProblems();
  if (problems.length > 0) {
    console.error(
      `the suite runs the peers side by side, and they are not installed as bench/package.json asks:\n` +
        problems.map((problem) => `  - ${problem}`).join('\n') +
        `\ninstall them (into bench/node_modules, never the library's) with:\n  ${INSTALL_COMMAND}\n` +
        `the benchmarks without peers run without it: npm run bench -- partitioning, npm run bench -- latency`,
    );
    return 1;
  }

  const coalescing = findCoalescingSwitch();
  const everyContender: Contender[] = [
    ...libraryContenders(coalescing),
    ...graphileWorkerContenders(),
    pgBossContender(),
    bullMqContender(),
    ...plainjobContenders(),
  ];
  if (values.list) {
    for (const contender of everyContender) console.log(`${contender.id.padEnd(32)} ${contender.label} (${contender.databases.join(', ')})`);
    return 0;
  }
  const selection = readSelection(values.only, everyContender);
  const messages = readCount(values.messages, '--messages', 2);
  const memoryRows = readCount(values['memory-rows'], '--memory-rows', 2);
  const memoryWorkers = readCount(values['memory-workers'], '--memory-workers', 1);
  const settings: SuiteSettings = {
    messages,
    databases: readList(values.db, '--db', BENCH_DATABASE_NAMES),
    workerCounts: readWorkerCounts(values.workers),
    rounds: readCount(values.rounds, '--rounds', 1),
    runTimeoutMs: readCount(values['timeout-seconds'], '--timeout-seconds', 1) * 1000,
    servers: serversFromEnvironment(),
    contenders: selection.contenders,
    publishOneRows: readCount(values['publish-one'], '--publish-one', 0),
    publishWays: publishWaysOf(selection.sections),
    memory: selection.sections.has('memory')
      ? {
          rows: memoryRows,
          workers: memoryWorkers,
          // The per-message lease path (coalesced where the library has it): the one whose
          // per-message allocations would show as growth.
          form: 'lease',
          batch: undefined,
          extraOptions: coalescing?.on ?? {},
          label: coalescing === undefined ? 'tablequeue lease' : 'tablequeue lease, coalesced',
        }
      : undefined,
  };
  const output = resolve(values.output);
  const interrupt = interruptOnSigint();

  const startedAt = new Date();
  const machineAtStart = describeMachine();
  const outcome = await runSuite(settings, interrupt, (line) => console.log(line));
  const results: SuiteResults = {
    benchmark: 'suite',
    command: `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    isInterrupted: outcome.isInterrupted,
    settings: {
      messages: settings.messages,
      databases: settings.databases,
      workerCounts: Object.fromEntries(settings.databases.map((database) => [database, settings.workerCounts[database]])),
      rounds: settings.rounds,
      runTimeoutMs: settings.runTimeoutMs,
      contenders: settings.contenders.map((contender) => contender.id),
      publishOneRows: settings.publishOneRows,
      isPublishIncluded: settings.publishWays.length > 0,
      publishWays: settings.publishWays,
      memoryRows: settings.memory?.rows,
      memoryWorkers: settings.memory?.workers,
    },
    coalescingOption: coalescing?.option,
    machine: machineAtStart,
    loadAverageAtEnd: describeMachine().loadAverage,
    serverVersions: outcome.serverVersions,
    peerVersions: Object.fromEntries(PEER_PACKAGES.map((name) => [name, installedVersion(name)])),
    drains: outcome.drains,
    publishes: outcome.publishes,
    memory: outcome.memory,
  };
  await mkdir(dirname(output), { recursive: true });
  await writeFile(output, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\n${formatSuiteText(results)}\n\nresults: ${output}`);
  return outcome.isInterrupted ? 130 : 0;
}

/**
 * Without `--workers`, the points the performance aims name: 16 workers on the servers, 4 on SQLite.
 * A full default run then takes about 20 minutes here; every worker count added to the servers
 * adds about as much again.
 */
const DEFAULT_WORKER_COUNTS: Readonly<Record<BenchDatabaseName, readonly number[]>> = { postgres: [16], mariadb: [16], sqlite: [4] };

function readWorkerCounts(text: string | undefined): Record<BenchDatabaseName, readonly number[]> {
  if (text === undefined) return { ...DEFAULT_WORKER_COUNTS };
  const counts = text.split(',').map((item) => readCount(item, '--workers', 1));
  return { postgres: counts, mariadb: counts, sqlite: counts };
}

/** `publish` runs every way; `publish.keyed` the keyed ones and the plain service publishes beside them. */
function publishWaysOf(sections: ReadonlySet<string>): readonly PublishWay[] {
  if (sections.has('publish')) return PUBLISH_WAYS;
  if (sections.has('publish.keyed')) return PUBLISH_WAYS.filter((way) => way.variant !== 'raw' && way.mode !== 'atOnce');
  return [];
}

/**
 * `--only`: section names choose sections; kinds and contender names choose drains (and the
 * drain section). Without `--only` everything runs.
 */
function readSelection(only: string | undefined, every: readonly Contender[]): { sections: Set<string>; contenders: Contender[] } {
  if (only === undefined) return { sections: new Set(SECTIONS), contenders: [...every] };
  const sections = new Set<string>();
  const chosen = new Set<Contender>();
  for (const item of only.split(',').map((word) => word.trim())) {
    if ((SECTIONS as readonly string[]).includes(item)) sections.add(item);
    else if ((KINDS as readonly string[]).includes(item)) every.filter((contender) => contender.kind === item).forEach((contender) => chosen.add(contender));
    else {
      const contender = every.find((candidate) => candidate.id === item);
      if (contender === undefined) {
        const names = [...SECTIONS, ...KINDS, ...every.map((candidate) => candidate.id)];
        throw new UsageError(`--only: "${item}" is not one of ${names.join(', ')}`);
      }
      chosen.add(contender);
    }
  }
  if (chosen.size > 0) sections.add('drain');
  const contenders = !sections.has('drain') ? [] : chosen.size > 0 ? every.filter((contender) => chosen.has(contender)) : [...every];
  return { sections, contenders };
}
