import type { BenchDatabaseName } from '../bench-database.js';
import { countRemainingRows, createBenchTable, fillBenchTable, type BenchForm } from '../partitioning/bench-table.js';
import type { DrainMeasurement, DrainRun } from '../partitioning/drain-watch.js';
import { drainWithRawLoop } from '../partitioning/raw-drain.js';
import { drainWithService, type ExtraSubscribeOptions } from '../partitioning/service-drain.js';
import type { CoalescingSwitch } from './coalescing.js';
import type { Contender, ContenderKind, ContenderRun } from './contender.js';

/** The batch handler's size: rows per claim and per handler call. */
export const SUITE_BATCH = 100;
/** Rows the prefetching lease runs keep claimed ahead of their workers. */
export const SUITE_PREFETCH = 500;

const EVERY_DATABASE: readonly BenchDatabaseName[] = ['postgres', 'mariadb', 'sqlite'];
/** SQLite has no row locks: its tables take the lease form only. */
const ROW_LOCK_DATABASES: readonly BenchDatabaseName[] = ['postgres', 'mariadb'];

interface LibraryShape {
  readonly name: string;
  readonly label: string;
  readonly form: BenchForm;
  readonly batch?: number;
  readonly databases: readonly BenchDatabaseName[];
}

/**
 * The library's forms, each as the service and as its raw loop: row lock and lease one message
 * at a time, the same with a batch handler of 100, and the lease form with settlement coalescing
 * when the library has it (its raw loop is the plain lease loop: coalescing is what the service
 * adds on top of the same statements).
 */
export function libraryContenders(coalescing: CoalescingSwitch | undefined): Contender[] {
  const shapes: LibraryShape[] = [
    { name: 'rowLock', label: 'row lock', form: 'rowLock', databases: ROW_LOCK_DATABASES },
    { name: 'lease', label: 'lease', form: 'lease', databases: EVERY_DATABASE },
    { name: 'rowLockBatch', label: `row lock, batch ${SUITE_BATCH}`, form: 'rowLock', batch: SUITE_BATCH, databases: ROW_LOCK_DATABASES },
    { name: 'leaseBatch', label: `lease, batch ${SUITE_BATCH}`, form: 'lease', batch: SUITE_BATCH, databases: EVERY_DATABASE },
  ];
  const contenders: Contender[] = [];
  for (const shape of shapes) {
    // The plain lease runs name coalescing off when the library has the switch, so they stay
    // the uncoalesced figure whatever its default.
    const extra = shape.name === 'lease' && coalescing !== undefined ? coalescing.off : {};
    contenders.push(libraryContender('service', shape, extra));
  }
  if (coalescing !== undefined) {
    const coalesced: LibraryShape = { name: 'leaseCoalesced', label: 'lease, coalesced', form: 'lease', databases: EVERY_DATABASE };
    contenders.push({ ...libraryContender('service', coalesced, coalescing.on), rawBaseline: 'raw.lease' });
    // The opt-in buffer of rows claimed ahead, as graphile-worker's local queue keeps one.
    const prefetched: LibraryShape = {
      name: 'leaseCoalescedPrefetch',
      label: `lease, coalesced, prefetch ${SUITE_PREFETCH}`,
      form: 'lease',
      databases: EVERY_DATABASE,
    };
    contenders.push({ ...libraryContender('service', prefetched, { ...coalescing.on, prefetch: SUITE_PREFETCH }), rawBaseline: 'raw.lease' });
  }
  for (const shape of shapes) contenders.push(libraryContender('raw', shape, {}));
  return contenders;
}

function libraryContender(kind: Extract<ContenderKind, 'service' | 'raw'>, shape: LibraryShape, extra: ExtraSubscribeOptions): Contender {
  const drain = (run: DrainRun): Promise<DrainMeasurement> => (kind === 'service' ? drainWithService(run, extra) : drainWithRawLoop(run));
  return {
    id: `${kind}.${shape.name}`,
    kind,
    label: kind === 'service' ? `tablequeue ${shape.label}` : `raw ${shape.label}`,
    databases: shape.databases,
    ...(kind === 'service' ? { rawBaseline: `raw.${shape.name}` } : {}),
    ...(shape.batch === undefined ? {} : { batch: shape.batch }),
    run: async (run: ContenderRun) => {
      const table = createBenchTable(shape.form);
      const serverVersion = await fillBenchTable(run.database, table, run.messages);
      const measurement = await drain({ ...run, table, ...(shape.batch === undefined ? {} : { batch: shape.batch }) });
      return { measurement, remaining: await countRemainingRows(run.database), serverVersion };
    },
  };
}
