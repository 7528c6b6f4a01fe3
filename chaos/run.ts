/**
 * The chaos harness: `npm run chaos [-- --messages N --db postgres,mariadb,sqlite-file --disruption …]`.
 * Real child processes against the real databases; the invariants are read from the database
 * afterwards. Separate from `npm test`: a full run takes many minutes.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { mariadbStand } from '../conformance/stands/mariadb-stand.js';
import { postgresStand } from '../conformance/stands/postgres-stand.js';
import { sqliteFileStand } from '../conformance/stands/sqlite-stand.js';
import type { Stand } from '../conformance/stand.js';
import { runChaosCase, type ChaosForm, type ChaosResult, type Disruption } from './chaos-scenarios.js';

const STANDS: Record<string, Stand> = { postgres: postgresStand, mariadb: mariadbStand, 'sqlite-file': sqliteFileStand };
const DISRUPTIONS: Record<string, Disruption> = {
  replicas: 'kill replicas',
  connections: 'kill connections',
  restart: 'restart database',
};

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '20000' },
    db: { type: 'string', default: 'postgres,mariadb,sqlite-file' },
    disruption: { type: 'string', default: 'replicas,connections,restart' },
  },
});

const results: ChaosResult[] = [];
for (const disruptionName of values.disruption.split(',')) {
  const disruption = DISRUPTIONS[disruptionName];
  if (disruption === undefined) throw new Error(`unknown disruption "${disruptionName}": ${Object.keys(DISRUPTIONS).join(', ')}`);
  for (const name of values.db.split(',')) {
    const stand = STANDS[name];
    if (stand === undefined) throw new Error(`unknown database "${name}": ${Object.keys(STANDS).join(', ')}`);
    // SQLite has no server to kill connections on or restart.
    if (stand.kind === 'sqlite' && disruption !== 'kill replicas') continue;
    const forms: ChaosForm[] = stand.capabilities.supportsRowLock ? ['rowLock', 'lease'] : ['lease'];
    for (const form of forms) {
      const result = await runChaosCase({ stand, form, disruption, messages: Number(values.messages) });
      results.push(result);
      console.log(
        `${result.database.padEnd(12)} ${result.form.padEnd(8)} ${result.disruption.padEnd(17)} ` +
          `${result.messages} messages, ${result.disruptions} disruptions, lost ${result.lost}, ` +
          `handled twice ${result.handledTwice}, ${result.seconds.toFixed(1)} s`,
      );
    }
  }
}
mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
writeFileSync(new URL('./results/chaos.json', import.meta.url), `${JSON.stringify({ date: new Date().toISOString(), results }, null, 2)}\n`);
const lost = results.reduce((sum, result) => sum + result.lost, 0);
console.log(lost === 0 ? 'nothing lost' : `LOST ${lost} messages`);
process.exitCode = lost === 0 ? 0 : 1;
