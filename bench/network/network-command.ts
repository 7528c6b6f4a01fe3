import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_POSTGRES_URL } from '../bench-database.js';
import { interruptOnSigint, readCount, readList, serversFromEnvironment, UsageError } from '../command-line.js';
import { describeMachine } from '../machine.js';
import { graphileWorkerContenders } from '../peers/graphile-worker-drain.js';
import { INSTALL_COMMAND, installedVersion, peerInstallProblems } from '../peers/peer-packages.js';
import { pgBossContender } from '../peers/pg-boss-drain.js';
import { findCoalescingSwitch } from '../suite/coalescing.js';
import type { Contender } from '../suite/contender.js';
import { libraryContenders } from '../suite/library-contenders.js';
import { libraryLatencyContenders, peerLatencyContenders } from './latency-contenders.js';
import { runNetworkBenchmark, type NetworkOutcome, type NetworkSettings } from './network-benchmark.js';

export const NETWORK_USAGE = `usage: npm run bench -- network [options]

PostgreSQL at a distance: a proxy on 127.0.0.1 in front of the server holds every chunk for half
the round trip each way, and the suite's PostgreSQL contenders (tablequeue's defaults, prefetch
and batch; graphile-worker; pg-boss) drain a backlog through it, then publish one message at a
time while each is timed to its handler's start. First the proxy's own cost: SELECT 1, publishes
one at a time and a drain through the proxy at no added delay against no proxy.

  --rtt-ms LIST           round trips the proxy adds, in ms (default 0,0.5,2,5; 0 = forwarded at once)
  --db postgres           the only database measured (MariaDB and SQLite peers are not run here)
  --messages N            backlog per drain (default 5000)
  --workers N             workers (concurrency) of every contender (default 16)
  --rounds N              interleaved drain rounds per round trip (default 2)
  --only LIST             contender ids (default all; --list prints them)
  --parts LIST            overhead,drain,latency (default all three)
  --latency-messages N    messages per latency run (default 200; 0 skips latency)
  --latency-interval-ms N one publish every N ms (default 25)
  --pings N               SELECT 1s timed per round-trip reading (default 500)
  --overhead-publishes N  publishes per run of the proxy's overhead check (default 1000; 0 skips it)
  --timeout-seconds N     each run ends by itself after this long (default 180)
  --output FILE           results as JSON (default bench/results/network.json)
  --list                  print the contenders and exit

Server: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}), on 127.0.0.1. The peers are dev
dependencies of the bench package: ${INSTALL_COMMAND}`;

const PARTS = ['overhead', 'drain', 'latency'] as const;

const DEFAULT_OUTPUT = fileURLToPath(new URL('../results/network.json', import.meta.url));

/** The library's settings a service would pick at a distance, and the PostgreSQL peers. */
const DRAIN_IDS = [
  'service.leaseCoalesced',
  'service.rowLock',
  'service.leaseCoalescedPrefetch',
  'service.leaseBatch',
  'service.rowLockBatch',
  'peer.graphileWorker',
  'peer.graphileWorkerLocalQueue',
  'peer.pgBossBatch',
];

/** The plain lease contender of the suite is the lease form's defaults once coalescing is on by default. */
const LABELS: Readonly<Record<string, string>> = {
  'service.leaseCoalesced': 'tablequeue lease, defaults',
  'service.rowLock': 'tablequeue row lock, defaults',
  'service.leaseCoalescedPrefetch': 'tablequeue lease, prefetch 500',
};

function drainContenders(): Contender[] {
  const coalescing = findCoalescingSwitch();
  const all = [...libraryContenders(coalescing), ...graphileWorkerContenders(), pgBossContender()];
  return DRAIN_IDS.flatMap((id) => {
    const contender = all.find((candidate) => candidate.id === id);
    return contender === undefined ? [] : [{ ...contender, label: LABELS[id] ?? contender.label }];
  });
}

/** `npm run bench -- network …`: argv starts with the word "network". Returns the exit code. */
export async function runNetworkCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      'rtt-ms': { type: 'string', default: '0,0.5,2,5' },
      db: { type: 'string', default: 'postgres' },
      messages: { type: 'string', default: '5000' },
      workers: { type: 'string', default: '16' },
      rounds: { type: 'string', default: '2' },
      only: { type: 'string' },
      parts: { type: 'string', default: PARTS.join(',') },
      'latency-messages': { type: 'string', default: '200' },
      'latency-interval-ms': { type: 'string', default: '25' },
      pings: { type: 'string', default: '500' },
      'overhead-publishes': { type: 'string', default: '1000' },
      'timeout-seconds': { type: 'string', default: '180' },
      output: { type: 'string', default: DEFAULT_OUTPUT },
      list: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(NETWORK_USAGE);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  if (values.db !== 'postgres') throw new UsageError(`--db: only postgres is measured at a distance; got "${values.db}"`);
  const only = values.only?.split(',').map((item) => item.trim());
  const drains = drainContenders().filter((contender) => only === undefined || only.includes(contender.id));
  const latencies = [...libraryLatencyContenders(), ...peerLatencyContenders()].filter((contender) => only === undefined || only.includes(contender.id));
  if (values.list) {
    for (const contender of drains) console.log(`${contender.id}  ${contender.label}`);
    return 0;
  }
  if (drains.length === 0 && latencies.length === 0) throw new UsageError(`--only: nothing matches "${values.only}"; --list prints the contenders`);
  if ([...drains, ...latencies].some((contender) => contender.id.startsWith('peer.'))) {
    const problems = peerInstallProblems().filter((line) => /pg-boss|graphile-worker/.test(line));
    if (problems.length > 0) throw new UsageError(`${problems.join('; ')}: run ${INSTALL_COMMAND}, or leave the peers out with --only`);
  }
  const parts = readList(values.parts, '--parts', PARTS);
  const roundTripsMs = values['rtt-ms'].split(',').map((item) => {
    const value = Number(item);
    if (!Number.isFinite(value) || value < 0 || value > 1_000) throw new UsageError(`--rtt-ms takes milliseconds from 0 to 1000; got "${item}"`);
    return value;
  });
  const settings: NetworkSettings = {
    messages: readCount(values.messages, '--messages', 2),
    roundTripsMs,
    rounds: readCount(values.rounds, '--rounds', 1),
    workers: readCount(values.workers, '--workers', 1),
    drainContenders: parts.includes('drain') ? drains : [],
    latencyContenders: parts.includes('latency') && readCount(values['latency-messages'], '--latency-messages', 0) > 0 ? latencies : [],
    latencyMessages: readCount(values['latency-messages'], '--latency-messages', 0),
    latencyIntervalMs: readCount(values['latency-interval-ms'], '--latency-interval-ms', 1),
    pings: readCount(values.pings, '--pings', 1),
    overheadPublishes: parts.includes('overhead') ? readCount(values['overhead-publishes'], '--overhead-publishes', 0) : 0,
    runTimeoutMs: readCount(values['timeout-seconds'], '--timeout-seconds', 1) * 1000,
    servers: serversFromEnvironment(),
  };
  const output = resolve(values.output);
  const interrupt = interruptOnSigint();
  const startedAt = new Date();
  const outcome = await runNetworkBenchmark(settings, interrupt, (line) => console.log(line));
  const results = {
    benchmark: 'network',
    command: `npm run bench -- ${argv.join(' ')}`,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    settings: { ...settings, servers: undefined, drainContenders: drains.map((contender) => contender.id), latencyContenders: settings.latencyContenders.map((contender) => contender.id) },
    peerVersions: { 'graphile-worker': installedVersion('graphile-worker'), 'pg-boss': installedVersion('pg-boss') },
    machine: describeMachine(),
    ...outcome,
  };
  await mkdir(dirname(output), { recursive: true });
  await writeFile(output, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`\n${formatNetworkTables(outcome)}\n\nresults: ${output}`);
  return outcome.isInterrupted ? 130 : 0;
}

/** Markdown tables: messages per second and round trips per message, then latency, per round trip. */
export function formatNetworkTables(outcome: NetworkOutcome): string {
  const points = outcome.points;
  const header = (title: string) => [`| ${title} | ${points.map((point) => `${point.roundTripMs} ms`).join(' | ')} |`, `|---|${points.map(() => '---:|').join('')}`];
  const measured = `| SELECT 1 through the proxy, p50 | ${points.map((point) => `${point.ping.p50Ms.toFixed(2)} ms`).join(' | ')} |`;
  const rate = (value: number | undefined) => (value === undefined ? '–' : Math.round(value).toLocaleString('en-US'));
  const labels = points[0]?.drains.map((drain) => drain.label) ?? [];
  const drainRows = labels.map((label) => `| ${label} | ${points.map((point) => {
    const drain = point.drains.find((candidate) => candidate.label === label);
    const trips = drain?.medianRoundTripsPerMessage;
    return `${rate(drain?.medianMessagesPerSecond)}${trips === undefined ? '' : ` (${trips.toFixed(2)})`}`;
  }).join(' | ')} |`);
  const latencyLabels = points[0]?.latencies.map((latency) => latency.label) ?? [];
  const latencyRows = latencyLabels.map((label) => `| ${label} | ${points.map((point) => {
    const record = point.latencies.find((candidate) => candidate.label === label)?.record;
    if (record === undefined || !record.isValid) return '–';
    return `${record.p50Ms!.toFixed(1)} / ${record.p99Ms!.toFixed(1)}`;
  }).join(' | ')} |`);
  const claimRows = latencyLabels.flatMap((label) => {
    const records = points.map((point) => point.latencies.find((candidate) => candidate.label === label)?.record);
    if (records.every((record) => record?.claims === undefined)) return [];
    return [`| ${label} | ${records.map((record) => (record?.claims === undefined ? '–' : `${Math.round(record.claims / record.seconds)} (${Math.round(record.emptyClaims! / record.seconds)})`)).join(' | ')} |`];
  });
  return [
    'Drain, messages per second (round trips per message over the run), median of the rounds:',
    '',
    ...header('round trip added'),
    measured,
    ...drainRows,
    '',
    'Publish to handler start, p50 / p99 in ms:',
    '',
    ...header('round trip added'),
    ...latencyRows,
    '',
    'Claims per second over the latency run (of which empty):',
    '',
    ...header('round trip added'),
    ...claimRows,
  ].join('\n');
}
