import { loadavg } from 'node:os';
import { Broker } from '../../src/broker/broker.js';
import { createDriver } from '../../src/driver/create-driver.js';
import { assertReachable, createBenchDatabase, type BenchDatabase, type BenchServers } from '../bench-database.js';
import { LatencyWatch } from '../latency/latency-benchmark.js';
import { settlesWithin } from '../partitioning/drain-watch.js';
import { BENCH_QUEUE_NAME, createBenchTable } from '../partitioning/bench-table.js';
import { median, percentile } from '../statistics.js';
import type { Contender } from '../suite/contender.js';
import type { LatencyContender } from './latency-contenders.js';
import { ProxyProcess, type ProxyReading } from './proxy-process.js';

export interface NetworkSettings {
  /** Messages each drain starts with. */
  readonly messages: number;
  /** Round trips the proxy adds, in ms (0: the proxy forwards at once). */
  readonly roundTripsMs: readonly number[];
  readonly rounds: number;
  readonly workers: number;
  readonly drainContenders: readonly Contender[];
  readonly latencyContenders: readonly LatencyContender[];
  readonly latencyMessages: number;
  readonly latencyIntervalMs: number;
  /** `SELECT 1`s timed one after another per round-trip reading. */
  readonly pings: number;
  /** Publishes, one at a time, per run of the proxy's overhead check; 0 skips the check. */
  readonly overheadPublishes: number;
  readonly runTimeoutMs: number;
  readonly servers: BenchServers;
}

export interface PingRecord {
  readonly p50Ms: number;
  readonly p99Ms: number;
}

export interface DrainRecord {
  readonly round: number;
  readonly messagesPerSecond: number | undefined;
  readonly seconds: number | undefined;
  /** Client round trips the proxy saw over the whole run (fill and start included) per message. */
  readonly roundTripsPerMessage: number;
  /** The proxy process's CPU time per message over the run, in microseconds. */
  readonly proxyCpuMicrosecondsPerMessage: number;
  readonly connections: number;
  readonly isValid: boolean;
  readonly failure: string | undefined;
  readonly loadAverage: number;
}

export interface LatencyRecord {
  /** The library's subscription: claim statements over the run and those that found nothing (peers: undefined). */
  readonly claims: number | undefined;
  readonly emptyClaims: number | undefined;
  readonly seconds: number;
  readonly p50Ms: number | undefined;
  readonly p99Ms: number | undefined;
  readonly maxMs: number | undefined;
  readonly handled: number;
  readonly isValid: boolean;
  readonly failure: string | undefined;
  readonly loadAverage: number;
}

export interface RoundTripPoint {
  readonly roundTripMs: number;
  /** `SELECT 1` timed through the proxy: the round trip clients actually met. */
  readonly ping: PingRecord;
  readonly drains: { readonly contender: string; readonly label: string; readonly runs: DrainRecord[]; readonly medianMessagesPerSecond: number | undefined; readonly medianRoundTripsPerMessage: number | undefined }[];
  readonly latencies: { readonly contender: string; readonly label: string; readonly record: LatencyRecord }[];
}

/** The proxy at no added delay against no proxy: what the proxy itself costs. */
export interface OverheadRecord {
  readonly round: number;
  readonly pingDirect: PingRecord;
  readonly pingProxied: PingRecord;
  readonly publishesPerSecondDirect: number;
  readonly publishesPerSecondProxied: number;
  readonly drainDirect: number | undefined;
  readonly drainProxied: number | undefined;
}

export interface NetworkOutcome {
  readonly overhead: OverheadRecord[];
  readonly points: RoundTripPoint[];
  readonly isInterrupted: boolean;
}

/**
 * First the proxy's own cost (no added delay against none); then a proxy process per round trip
 * in front of the PostgreSQL server, each one's real round trip read with `SELECT 1`; `rounds`
 * rounds in which every drain contender drains a fresh database through each proxy; then one
 * latency run per latency contender and round trip.
 */
export async function runNetworkBenchmark(settings: NetworkSettings, interrupt: AbortSignal, onProgress: (line: string) => void): Promise<NetworkOutcome> {
  await assertReachable('postgres', settings.servers);
  const target = targetOf(settings.servers.postgresUrl);
  const overhead: OverheadRecord[] = [];
  const points: RoundTripPoint[] = [];
  if (settings.overheadPublishes > 0) {
    const proxy = await ProxyProcess.start(target, 0);
    try {
      const drainContender = settings.drainContenders[0];
      for (let round = 1; round <= settings.rounds && !interrupt.aborted; round += 1) {
        const record = await measureOverhead(settings, proxy, drainContender, round, interrupt);
        overhead.push(record);
        onProgress(describeOverhead(record, drainContender?.label));
      }
    } finally {
      await proxy.stop();
    }
  }
  // Every round trip's proxy runs for the whole benchmark (an idle one costs nothing), so each
  // round takes every round trip and contender in turn and all of them meet the same drift of a
  // shared machine.
  const proxies: ProxyProcess[] = [];
  try {
    for (const roundTripMs of settings.roundTripsMs) proxies.push(await ProxyProcess.start(target, roundTripMs / 2));
    const pings: PingRecord[] = [];
    for (const proxy of proxies) {
      const ping = await measurePing(proxy.urlThrough(settings.servers.postgresUrl), settings.pings);
      pings.push(ping);
      onProgress(`rtt ${proxy.oneWayDelayMs * 2} ms: SELECT 1 through the proxy p50 ${ping.p50Ms.toFixed(2)} ms, p99 ${ping.p99Ms.toFixed(2)} ms`);
    }
    const runs = proxies.map(() => new Map<string, DrainRecord[]>(settings.drainContenders.map((contender) => [contender.id, []])));
    for (let round = 1; round <= settings.rounds && !interrupt.aborted; round += 1) {
      for (const [index, proxy] of proxies.entries()) {
        for (const contender of settings.drainContenders) {
          if (interrupt.aborted) break;
          const record = await drainOnce(settings, proxy, contender, round, interrupt);
          runs[index]!.get(contender.id)!.push(record);
          onProgress(`rtt ${proxy.oneWayDelayMs * 2} ms, round ${round}/${settings.rounds}, ${contender.label}: ${describeDrain(record)}`);
        }
      }
    }
    const latencies = proxies.map((): RoundTripPoint['latencies'][number][] => []);
    for (const contender of settings.latencyContenders) {
      for (const [index, proxy] of proxies.entries()) {
        if (interrupt.aborted) break;
        const record = await latencyThroughProxy(settings, proxy, contender, interrupt);
        latencies[index]!.push({ contender: contender.id, label: contender.label, record });
        onProgress(`rtt ${proxy.oneWayDelayMs * 2} ms, latency, ${contender.label}: ${describeLatency(record)}`);
      }
    }
    for (const [index, roundTripMs] of settings.roundTripsMs.entries()) {
      points.push({
        roundTripMs,
        ping: pings[index]!,
        drains: settings.drainContenders.map((contender) => {
          const all = runs[index]!.get(contender.id)!;
          const valid = all.filter((run) => run.isValid);
          return {
            contender: contender.id,
            label: contender.label,
            runs: all,
            medianMessagesPerSecond: median(valid.map((run) => run.messagesPerSecond!)),
            medianRoundTripsPerMessage: median(valid.map((run) => run.roundTripsPerMessage)),
          };
        }),
        latencies: latencies[index]!,
      });
    }
  } finally {
    for (const proxy of proxies) await proxy.stop();
  }
  return { overhead, points, isInterrupted: interrupt.aborted };
}

function targetOf(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port || 5432) };
}

/** `SELECT 1` one after another on one connection, each timed. */
async function measurePing(url: string, count: number): Promise<PingRecord> {
  const driver = createDriver(url, { poolSize: 1 });
  await driver.open();
  const times: number[] = [];
  try {
    // The first ones open the connection and prepare the statement.
    for (let index = 0; index < 10; index += 1) await driver.execute({ name: 'bench.ping', sql: 'SELECT 1', values: [] });
    for (let index = 0; index < count; index += 1) {
      const startedAt = performance.now();
      await driver.execute({ name: 'bench.ping', sql: 'SELECT 1', values: [] });
      times.push(performance.now() - startedAt);
    }
  } finally {
    await driver.close();
  }
  return { p50Ms: percentile(times, 50)!, p99Ms: percentile(times, 99)! };
}

/** Publishes one at a time into a fresh lease table, awaited each: publishes per second. */
async function measurePublishOneAtATime(database: BenchDatabase, url: string, publishes: number): Promise<number> {
  const table = createBenchTable('lease');
  const setup = createDriver(database.url, { poolSize: 1 });
  await setup.open();
  try {
    for (const sql of table.createTableSql('postgres')) await setup.execute({ name: 'bench.admin', sql, values: [] });
  } finally {
    await setup.close();
  }
  const broker = new Broker({ database: url, pool: { max: 2 } });
  await broker.start();
  try {
    const queue = table.queue<{ n: number }>(BENCH_QUEUE_NAME);
    await broker.publish(queue, { n: -1 });
    const startedAt = performance.now();
    for (let n = 0; n < publishes; n += 1) await broker.publish(queue, { n });
    return publishes / ((performance.now() - startedAt) / 1000);
  } finally {
    await settlesWithin(broker.stop(), 20_000);
  }
}

async function measureOverhead(
  settings: NetworkSettings,
  proxy: ProxyProcess,
  drainContender: Contender | undefined,
  round: number,
  interrupt: AbortSignal,
): Promise<OverheadRecord> {
  const direct = settings.servers.postgresUrl;
  const pingDirect = await measurePing(direct, settings.pings);
  const pingProxied = await measurePing(proxy.urlThrough(direct), settings.pings);
  const publishes = async (throughProxy: boolean) => {
    const database = await createBenchDatabase('postgres', settings.servers);
    try {
      return await measurePublishOneAtATime(database, throughProxy ? proxy.urlThrough(database.url) : database.url, settings.overheadPublishes);
    } finally {
      await database.drop();
    }
  };
  const publishesPerSecondDirect = await publishes(false);
  const publishesPerSecondProxied = await publishes(true);
  let drainDirect: number | undefined;
  let drainProxied: number | undefined;
  if (drainContender !== undefined) {
    drainDirect = (await drainOnce(settings, undefined, drainContender, round, interrupt)).messagesPerSecond;
    drainProxied = (await drainOnce(settings, proxy, drainContender, round, interrupt)).messagesPerSecond;
  }
  return { round, pingDirect, pingProxied, publishesPerSecondDirect, publishesPerSecondProxied, drainDirect, drainProxied };
}

/**
 * One drain on a fresh database, the contender reaching it through `proxy` (directly when
 * undefined) for everything it does: creating its tables, filling, draining.
 */
async function drainOnce(settings: NetworkSettings, proxy: ProxyProcess | undefined, contender: Contender, round: number, interrupt: AbortSignal): Promise<DrainRecord> {
  // A controller held here rather than AbortSignal.any(), as in the suite: on Node 20 the
  // combined signal can be garbage-collected while a drain runs.
  const deadline = new AbortController();
  const endRun = () => deadline.abort();
  const timer = setTimeout(endRun, settings.runTimeoutMs);
  interrupt.addEventListener('abort', endRun, { once: true });
  const database = await createBenchDatabase('postgres', settings.servers);
  const reached: BenchDatabase = proxy === undefined ? database : { ...database, url: proxy.urlThrough(database.url) };
  try {
    await proxy?.read();
    const outcome = await contender.run({ database: reached, workers: settings.workers, messages: settings.messages, signal: deadline.signal });
    const reading: ProxyReading | undefined = await proxy?.read();
    const { measurement } = outcome;
    const isValid = !measurement.isCut && measurement.handled === settings.messages && outcome.remaining === 0;
    return {
      round,
      messagesPerSecond: isValid ? measurement.messagesPerSecond : undefined,
      seconds: isValid ? measurement.seconds : undefined,
      roundTripsPerMessage: (reading?.clientTurns ?? 0) / settings.messages,
      proxyCpuMicrosecondsPerMessage: (reading?.cpuMicroseconds ?? 0) / settings.messages,
      connections: reading?.connections ?? 0,
      isValid,
      failure: isValid ? undefined : `handled ${measurement.handled}, ${outcome.remaining} left${measurement.isCut ? ', cut short' : ''}${measurement.firstError === undefined ? '' : `, first error: ${measurement.firstError}`}`,
      loadAverage: loadavg()[0]!,
    };
  } catch (error) {
    const failure = error instanceof Error ? error.message : String(error);
    return { round, messagesPerSecond: undefined, seconds: undefined, roundTripsPerMessage: 0, proxyCpuMicrosecondsPerMessage: 0, connections: 0, isValid: false, failure, loadAverage: loadavg()[0]! };
  } finally {
    clearTimeout(timer);
    interrupt.removeEventListener('abort', endRun);
    await database.drop().catch((error: unknown) => console.error(`could not drop ${database.url}; remove it by hand:`, error));
  }
}

async function latencyThroughProxy(settings: NetworkSettings, proxy: ProxyProcess, contender: LatencyContender, interrupt: AbortSignal): Promise<LatencyRecord> {
  const deadline = new AbortController();
  const endRun = () => deadline.abort();
  const timer = setTimeout(endRun, settings.runTimeoutMs);
  interrupt.addEventListener('abort', endRun, { once: true });
  const watch = new LatencyWatch(settings.latencyMessages, deadline.signal);
  const database = await createBenchDatabase('postgres', settings.servers);
  let failure: string | undefined;
  let claims: { claims: number; emptyClaims: number } | undefined;
  const startedAt = performance.now();
  try {
    await contender.run({
      onClaims: (count, empty) => (claims = { claims: count, emptyClaims: empty }),
      url: proxy.urlThrough(database.url),
      directUrl: database.url,
      workers: settings.workers,
      messages: settings.latencyMessages,
      intervalMs: settings.latencyIntervalMs,
      watch,
    });
  } catch (error) {
    failure = error instanceof Error ? error.message : String(error);
    watch.recordFailure(error);
  } finally {
    clearTimeout(timer);
    interrupt.removeEventListener('abort', endRun);
    await database.drop().catch((error: unknown) => console.error(`could not drop ${database.url}; remove it by hand:`, error));
  }
  const summary = watch.summary();
  return {
    claims: claims?.claims,
    emptyClaims: claims?.emptyClaims,
    seconds: (performance.now() - startedAt) / 1000,
    p50Ms: summary.p50,
    p99Ms: summary.p99,
    maxMs: summary.max,
    handled: summary.handled,
    isValid: summary.isValid,
    failure: failure ?? summary.firstError,
    loadAverage: loadavg()[0]!,
  };
}

function describeOverhead(record: OverheadRecord, drainLabel: string | undefined): string {
  const ping = (value: PingRecord) => `p50 ${value.p50Ms.toFixed(3)} ms, p99 ${value.p99Ms.toFixed(3)} ms`;
  const rate = (value: number | undefined) => (value === undefined ? '–' : Math.round(value).toLocaleString('en-US'));
  return [
    `overhead, round ${record.round}: SELECT 1 direct ${ping(record.pingDirect)}; through the proxy at 0 ms ${ping(record.pingProxied)}`,
    `  publishes one at a time: direct ${rate(record.publishesPerSecondDirect)}/s, proxied ${rate(record.publishesPerSecondProxied)}/s`,
    `  drain (${drainLabel ?? 'none'}): direct ${rate(record.drainDirect)} msg/s, proxied ${rate(record.drainProxied)} msg/s`,
  ].join('\n');
}

function describeDrain(record: DrainRecord): string {
  if (!record.isValid) return `not counted: ${record.failure}`;
  const rate = Math.round(record.messagesPerSecond!).toLocaleString('en-US');
  return `${rate} msg/s (${record.seconds!.toFixed(2)} s, ${record.roundTripsPerMessage.toFixed(2)} round trips/msg over the run, proxy ${Math.round(record.proxyCpuMicrosecondsPerMessage)} µs CPU/msg, load ${record.loadAverage.toFixed(1)})`;
}

function describeLatency(record: LatencyRecord): string {
  if (!record.isValid) return `not counted: handled ${record.handled}${record.failure === undefined ? '' : `, ${record.failure}`}`;
  const claims = record.claims === undefined ? '' : `, ${record.claims} claims of which ${record.emptyClaims} empty`;
  return `p50 ${record.p50Ms!.toFixed(1)} ms, p99 ${record.p99Ms!.toFixed(1)} ms, max ${record.maxMs!.toFixed(1)} ms (load ${record.loadAverage.toFixed(1)}${claims})`;
}
