/**
 * The chaos harness: `npm run chaos [-- --scenario drain,slow-handlers,contention,order,exactly-once
 * --db postgres,mariadb,sqlite-file --messages N --disruption replicas,connections,restart]`.
 * Real child processes against the real databases; the invariants are read from the database
 * afterwards. Separate from `npm test`: a full run takes many minutes. Each run's results are
 * printed and written to chaos/results/<scenario>.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { mariadbStand } from '../conformance/stands/mariadb-stand.js';
import { postgresStand } from '../conformance/stands/postgres-stand.js';
import { sqliteFileStand } from '../conformance/stands/sqlite-stand.js';
import type { Stand } from '../conformance/stand.js';
import { runContentionCase, type ContentionVariant } from './contention-scenario.js';
import { runChaosCase, type ChaosForm, type Disruption } from './drain-scenario.js';
import { runExactlyOnceCase, type ExactlyOnceForm } from './exactly-once-scenario.js';
import { runOrderCase, type OrderKind } from './order-scenario.js';
import { runSlowHandlerCase } from './slow-handler-scenario.js';

const STANDS: Record<string, Stand> = { postgres: postgresStand, mariadb: mariadbStand, 'sqlite-file': sqliteFileStand };
const DISRUPTIONS: Record<string, Disruption> = {
  replicas: 'kill replicas',
  connections: 'kill connections',
  restart: 'restart database',
};

const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'drain' },
    /** Runs only the variants of a scenario whose names contain this text (contention). */
    only: { type: 'string' },
    messages: { type: 'string' },
    db: { type: 'string', default: 'postgres,mariadb,sqlite-file' },
    disruption: { type: 'string', default: 'replicas,connections,restart' },
  },
});

/** What fails a run: a message lost, or a promise of the scenario broken (`broken`). */
interface Result {
  readonly database: string;
  readonly lost: number;
  readonly broken?: number;
}

const SCENARIOS: Record<string, (stand: Stand, messages: number | undefined) => AsyncGenerator<Result>> = {
  async *drain(stand, messages) {
    for (const disruptionName of values.disruption.split(',')) {
      const disruption = DISRUPTIONS[disruptionName];
      if (disruption === undefined) throw new Error(`unknown disruption "${disruptionName}": ${Object.keys(DISRUPTIONS).join(', ')}`);
      // SQLite has no server to kill connections on or restart.
      if (stand.kind === 'sqlite' && disruption !== 'kill replicas') continue;
      const forms: ChaosForm[] = stand.capabilities.supportsRowLock ? ['rowLock', 'lease'] : ['lease'];
      for (const form of forms) yield runChaosCase({ stand, form, disruption, messages: messages ?? 20_000 });
    }
  },
  async *'slow-handlers'(stand) {
    yield runSlowHandlerCase(stand, 'renewal');
    yield runSlowHandlerCase(stand, 'stall');
  },
  async *contention(stand, messages) {
    // Deadlock and lock wait errors are MySQL/MariaDB errnos; the other servers have no case here.
    if (stand.kind !== 'mysql') return;
    const variants: ContentionVariant[] = [
      'rowLock',
      'rowLock repeatable read',
      'rowLock fifo',
      'rowLock table locked',
      'lease',
      'lease fifo',
      'lease table locked',
    ];
    const chosen = variants.filter((variant) => values.only === undefined || variant.includes(values.only));
    for (const variant of chosen) yield runContentionCase({ stand, variant, messages: messages ?? 400 });
  },
  async *order(stand, messages) {
    const forms: ChaosForm[] = stand.capabilities.supportsRowLock ? ['rowLock', 'lease'] : ['lease'];
    const kinds: OrderKind[] = ['fifo groups', 'keyed lanes'];
    for (const kind of kinds) for (const form of forms) yield runOrderCase({ stand, form, kind, messages });
  },
  async *'exactly-once'(stand, messages) {
    const forms: ExactlyOnceForm[] = [
      ...(stand.capabilities.supportsRowLock ? (['rowLock'] as const) : []),
      'lease',
      // SQLite keeps advisory keys in one process; replicas in several processes would share rows.
      ...(stand.capabilities.supportsSessionLocks ? (['advisory'] as const) : []),
    ];
    for (const form of forms) yield runExactlyOnceCase({ stand, form, messages: messages ?? 20_000 });
  },
};

mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
let lost = 0;
let broken = 0;
for (const scenario of values.scenario.split(',')) {
  const run = SCENARIOS[scenario];
  if (run === undefined) throw new Error(`unknown scenario "${scenario}": ${Object.keys(SCENARIOS).join(', ')}`);
  const results: Result[] = [];
  for (const name of values.db.split(',')) {
    const stand = STANDS[name];
    if (stand === undefined) throw new Error(`unknown database "${name}": ${Object.keys(STANDS).join(', ')}`);
    for await (const result of run(stand, values.messages === undefined ? undefined : Number(values.messages))) {
      results.push(result);
      lost += result.lost;
      broken += result.broken ?? 0;
      console.log(`${scenario} ${JSON.stringify(result)}`);
    }
  }
  const file = new URL(`./results/${scenario}.json`, import.meta.url);
  writeFileSync(file, `${JSON.stringify({ date: new Date().toISOString(), results }, null, 2)}\n`);
}
console.log(lost === 0 ? 'nothing lost' : `LOST ${lost} messages`);
if (broken > 0) console.log(`BROKEN: ${broken} promises`);
process.exitCode = lost === 0 && broken === 0 ? 0 : 1;
