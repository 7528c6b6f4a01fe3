import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Stand } from '../stand.js';
import { createMysqlFamilyStand } from './mysql-family-stand.js';

export const GALERA_URLS_VARIABLE = 'GALERA_URLS';
/** The nodes scripts/galera-cluster.sh starts, as .ci/run starts them. */
const DEFAULT_GALERA_URLS = [3311, 3312, 3313].map((port) => `mysql://root@127.0.0.1:${port}/test`);
const CLUSTER_SCRIPT = fileURLToPath(new URL('../../scripts/galera-cluster.sh', import.meta.url));
/** A restart waits for the node's recovery, its catch-up and the others' view of it (6 s here). */
const CLUSTER_SCRIPT_TIMEOUT_MS = 60_000;

/** A Galera cluster's nodes: the stand itself goes through the first one. */
export interface GaleraStand extends Stand {
  /** Every node's server URL (comma-separated in `GALERA_URLS`), the stand's own node first. */
  readonly nodeUrls: readonly string[];
}

const nodeUrls = (process.env[GALERA_URLS_VARIABLE]?.split(',') ?? DEFAULT_GALERA_URLS).map((url) => url.trim());

/**
 * MariaDB nodes of a Galera cluster. Each test's database is made through the first node, and
 * DDL reaches every node before it returns. Its brokers and admin queries use the first node, so
 * its brokers declare one writer node, which the row lock form needs there; the advisory lock
 * form is refused on Galera, so suites treat its locks as absent. Suites that spread brokers over
 * the nodes reach them through `nodeUrls`.
 */
export const galeraStand: GaleraStand = {
  ...createMysqlFamilyStand({
    name: 'galera',
    serverUrl: nodeUrls[0]!,
    capabilities: { supportsSessionLocks: false },
    brokerOptions: { galera: { singleWriter: true } },
  }),
  nodeUrls,
  async isReachable() {
    const nodes = nodeUrls.map((serverUrl) => createMysqlFamilyStand({ name: 'galera', serverUrl }));
    const answers = await Promise.all(nodes.map((node) => node.isReachable()));
    return answers.every(Boolean);
  },
};

/**
 * The cluster scripts/galera-cluster.sh runs on this machine: a node's server process, and
 * `start`, which starts any node that is down and waits until all three are Synced.
 */
export const galeraCluster = {
  /** Node `node`'s (1 to 3) server process id; undefined when the script's cluster does not run it. */
  async pidOf(node: number): Promise<number | undefined> {
    try {
      const { stdout } = await promisify(execFile)(CLUSTER_SCRIPT, ['pid', String(node)]);
      const pid = Number(stdout.trim());
      return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  },
  async start(): Promise<void> {
    await promisify(execFile)(CLUSTER_SCRIPT, ['start'], { timeout: CLUSTER_SCRIPT_TIMEOUT_MS });
  },
};
