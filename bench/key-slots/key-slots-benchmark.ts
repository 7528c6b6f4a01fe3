import { parseArgs } from 'node:util';
import { createDriver } from '../../src/driver/create-driver.js';
import { Broker, defineTable } from '../../src/index.js';
import { createBenchDatabase, DEFAULT_MARIADB_URL, DEFAULT_POSTGRES_URL, runSql } from '../bench-database.js';
import { readCount, readList, serversFromEnvironment, UsageError } from '../command-line.js';
import { describeMachine } from '../machine.js';

export const KEY_SLOTS_USAGE = `usage: npm run bench -- key-slots [options]

What a subscription with concurrency.perKey costs as its backlog and its key slots grow. A
broker subscribes once (which creates the slot table) and stops; --stale-keys keys that have no
row left get their --per-key slots each, inserted on the server side as claims would have left
them; then --rows rows of --keys live keys are published and a new broker (--workers workers,
perKey --per-key) drains them, timed from its start to the --timed-th handler call. Run it with
--stale-keys 0 beside it for the same drain on a clean slot table. --form lease drains a lease
table instead, whose claims rank rows by key and keep no slots (--stale-keys must be 0), made
with the in-work index when --in-work-index is given. --per-key 0 drains without the limit.

  --db LIST              postgres,mariadb (default both)
  --form NAME            rowLock or lease (default rowLock)
  --stale-keys N         keys without rows whose slots are left (default 100000)
  --keys N               live keys (default 40)
  --rows N               rows published (default 4000)
  --timed N              handler calls timed, the first of the drain (default all the rows)
  --per-key N            concurrency.perKey, 0 for none (default 2)
  --in-work-index        with --form lease: createTableSql(dialect, { inWorkIndex: true })
  --workers N            (default 8)
  --timeout-seconds N    a drain that has not ended by then is reported as such (default 600)

Servers: POSTGRES_URL (default ${DEFAULT_POSTGRES_URL}) and MARIADB_URL
(default ${DEFAULT_MARIADB_URL}); both must be on 127.0.0.1.`;

type ServerName = 'postgres' | 'mariadb';

interface KeySlotsSettings {
  readonly form: 'rowLock' | 'lease';
  readonly staleKeys: number;
  readonly keys: number;
  readonly rows: number;
  readonly timed: number;
  readonly inWorkIndex: boolean;
  readonly perKey: number;
  readonly workers: number;
  readonly timeoutMs: number;
}

/** `npm run bench -- key-slots …`: argv starts with the word "key-slots". Returns the exit code. */
export async function runKeySlotsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      db: { type: 'string', default: 'postgres,mariadb' },
      form: { type: 'string', default: 'rowLock' },
      'stale-keys': { type: 'string', default: '100000' },
      keys: { type: 'string', default: '40' },
      rows: { type: 'string', default: '4000' },
      timed: { type: 'string' },
      'in-work-index': { type: 'boolean', default: false },
      'per-key': { type: 'string', default: '2' },
      workers: { type: 'string', default: '8' },
      'timeout-seconds': { type: 'string', default: '600' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(KEY_SLOTS_USAGE);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
  const databases = readList<ServerName>(values.db, '--db', ['postgres', 'mariadb']);
  const [form] = readList<'rowLock' | 'lease'>(values.form, '--form', ['rowLock', 'lease']);
  if (values.form.includes(',')) throw new UsageError('--form takes one of rowLock, lease');
  const rows = readCount(values.rows, '--rows', 1);
  const settings: KeySlotsSettings = {
    form: form!,
    staleKeys: readCount(values['stale-keys'], '--stale-keys', 0),
    keys: readCount(values.keys, '--keys', 1),
    rows,
    timed: values.timed === undefined ? rows : readCount(values.timed, '--timed', 1),
    inWorkIndex: values['in-work-index'],
    perKey: readCount(values['per-key'], '--per-key', 0),
    workers: readCount(values.workers, '--workers', 1),
    timeoutMs: readCount(values['timeout-seconds'], '--timeout-seconds', 1) * 1000,
  };
  if (settings.form === 'lease' && settings.staleKeys > 0) throw new UsageError('--form lease keeps no key slots: give --stale-keys 0');
  if (settings.perKey === 0 && settings.staleKeys > 0) throw new UsageError('--per-key 0 keeps no key slots: give --stale-keys 0');
  if (settings.inWorkIndex && settings.form !== 'lease') throw new UsageError('--in-work-index indexes locked_until: give --form lease');
  if (settings.timed > settings.rows) throw new UsageError(`--timed ${settings.timed} is more than the ${settings.rows} rows published`);
  const machine = describeMachine();
  console.log(`${machine.cpuCount} × ${machine.cpuModel}, ${machine.os}, Node ${machine.node}, commit ${machine.gitCommit ?? '?'}, library from ${machine.library}`);
  console.log(`load average at start: ${machine.loadAverage.join(' ')}; ${new Date().toISOString()}`);
  for (const database of databases) console.log(await drainBesideStaleSlots(database, settings));
  return 0;
}

async function drainBesideStaleSlots(database: ServerName, settings: KeySlotsSettings): Promise<string> {
  const bench = await createBenchDatabase(database, serversFromEnvironment());
  const admin = createDriver(bench.url, { poolSize: 1 });
  const brokers: Broker[] = [];
  try {
    await admin.open();
    // Read committed: what perKey in the row lock form needs on MariaDB.
    const table = defineTable(
      settings.form === 'lease'
        ? { table: 'jobs', id: 'id', partitionKey: 'customer', payload: 'payload', lockedUntil: 'locked_until', retryAfter: 'retry_after', attempt: 'attempt' }
        : { table: 'jobs', id: 'id', partitionKey: 'customer', payload: 'payload', isolation: 'read committed' },
    );
    for (const sql of table.createTableSql(database, { inWorkIndex: settings.inWorkIndex })) await runSql(admin, sql);
    const queue = table.queue<number>('default');
    const options = { workers: settings.workers, ...(settings.perKey === 0 ? {} : { concurrency: { perKey: settings.perKey } }) };
    const first = new Broker({ database: bench.url });
    brokers.push(first);
    first.subscribe(queue, () => undefined, options);
    await first.start();
    await first.stop();
    if (settings.staleKeys > 0) await runSql(admin, staleSlotsSql(database, settings));
    const publisher = new Broker({ database: bench.url });
    brokers.push(publisher);
    await publisher.start();
    const rows = Array.from({ length: settings.rows }, (_, index) => ({ payload: index, partitionKey: `k${String(index % settings.keys).padStart(6, '0')}` }));
    for (let start = 0; start < rows.length; start += 1000) await publisher.publishMany(queue, rows.slice(start, start + 1000));
    await publisher.stop();
    let handled = 0;
    let lastAt = 0;
    let finished!: () => void;
    const allHandled = new Promise<void>((resolve) => (finished = resolve));
    const drainer = new Broker({ database: bench.url });
    brokers.push(drainer);
    drainer.subscribe(queue, () => {
      handled += 1;
      lastAt = performance.now();
      if (handled === settings.timed) finished();
    }, options);
    const startedAt = performance.now();
    await drainer.start();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timedOut'>((resolve) => (timer = setTimeout(() => resolve('timedOut'), settings.timeoutMs)));
    const ending = await Promise.race([allHandled.then(() => 'drained' as const), timedOut]);
    clearTimeout(timer);
    const slots =
      settings.form === 'lease' || settings.perKey === 0 ? '' : `; slot rows ${String((await runSql(admin, 'SELECT COUNT(*) AS n FROM tablequeue_concurrency_key_slots'))[0]?.['n'])}`;
    const limit = settings.perKey === 0 ? 'no perKey' : `perKey ${settings.perKey}`;
    const what = `${database}, ${settings.form}${settings.inWorkIndex ? ' with the in-work index' : ''}, ${limit}, ${settings.staleKeys * settings.perKey} slots of ${settings.staleKeys} keys gone, ${settings.rows} rows of ${settings.keys} keys`;
    if (ending === 'timedOut') return `${what}: ${handled} of ${settings.timed} handled when ${settings.timeoutMs / 1000} s had passed${slots}`;
    const seconds = (lastAt - startedAt) / 1000;
    return `${what}: the first ${settings.timed} in ${seconds.toFixed(2)} s from start (${Math.round(settings.timed / seconds)} msg/s)${slots}`;
  } finally {
    for (const broker of brokers) await broker.stop().catch(() => undefined);
    await admin.close();
    await bench.drop();
  }
}

/** The slots `1..perKey` of each stale key, inserted from a generated series on the server. */
function staleSlotsSql(database: ServerName, settings: KeySlotsSettings): string {
  const { staleKeys, perKey } = settings;
  if (database === 'postgres') {
    return `INSERT INTO tablequeue_concurrency_key_slots (table_name, queue_name, key_value, slot) SELECT 'jobs', '', 'gone' || lpad(n::text, 9, '0'), s FROM generate_series(1, ${staleKeys}) AS n, generate_series(1, ${perKey}) AS s`;
  }
  return `INSERT INTO tablequeue_concurrency_key_slots (table_name, queue_name, key_value, slot) SELECT 'jobs', '', CONCAT('gone', LPAD(n.seq, 9, '0')), s.seq FROM seq_1_to_${staleKeys} AS n, seq_1_to_${perKey} AS s`;
}
