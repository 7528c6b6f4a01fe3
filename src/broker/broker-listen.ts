import type { Dialect } from '../dialect/dialect.js';
import { parseDatabaseUrl } from '../driver/database-url.js';
import type { Driver } from '../driver/driver.js';
import { UnsupportedError } from '../errors.js';
import type { ResolvedBrokerOptions } from './broker-options.js';
import { isTransactionPooled } from './broker-pooler.js';
import type { NotifyListenerOptions } from './notify-listener.js';

/** What wake-ups across processes need from the dialect and the driver. */
export type ListenSupport = Pick<NotifyListenerOptions, 'statements' | 'openSession'>;

/**
 * Whether `listen` is on, and what it needs: on by default for a pool opened from a URL on a
 * database with LISTEN/NOTIFY, on for the service's pool only when asked. `listen: true`
 * elsewhere is refused, since it would silently change nothing; so is LISTEN through a
 * transaction pooler, which hands the session's LISTEN to a server session that later serves
 * other clients while the broker's connection hears nothing.
 */
export function listenSupportOf(
  options: Pick<ResolvedBrokerOptions, 'listen' | 'listenUrl' | 'database'>,
  driver: Driver,
  dialect: Dialect,
): ListenSupport | undefined {
  const { listen, listenUrl, database } = options;
  const isOn = listen ?? (typeof database === 'string' && dialect.capabilities.supportsListenNotify);
  if (!isOn) return undefined;
  const openSession = driver.openNotificationClient?.bind(driver);
  if (dialect.notify === undefined || openSession === undefined) {
    throw new UnsupportedError({
      database: dialect.name,
      feature: 'listen',
      message:
        `listen is PostgreSQL-only (LISTEN/NOTIFY) and the database is ${driver.description}; remove the option: ` +
        'rows that other processes publish are found by polling every pollIntervalMs',
    });
  }
  if (isTransactionPooled(driver)) refuseListenThroughPooler(driver, listen, listenUrl, database);
  return {
    statements: dialect.notify,
    openSession: listenUrl === undefined ? openSession : (handlers) => openSession(handlers, listenUrl),
  };
}

function refuseListenThroughPooler(
  driver: Driver,
  listen: boolean | undefined,
  listenUrl: string | undefined,
  database: unknown,
): void {
  const remedy =
    "set listen: { url: 'postgres://…' } to the server itself (or a session-mode pooler) for the LISTEN connection, " +
    'or listen: false to find rows other processes publish by polling every pollIntervalMs';
  if (listenUrl === undefined) {
    throw new UnsupportedError({
      database: 'postgres',
      feature: 'listen',
      message:
        `${listen === undefined ? 'listen (on by default for a URL)' : 'listen: true'} cannot work through the transaction pooler at ` +
        `${driver.description}: a LISTEN stays on whichever server session ran it, which then serves other clients; ${remedy}`,
    });
  }
  if (typeof database === 'string' && sameAddress(database, listenUrl)) {
    throw new UnsupportedError({
      database: 'postgres',
      feature: 'listen',
      message: `listen.url names the transaction pooler the pool goes through (${driver.description}); ${remedy}`,
    });
  }
}

function sameAddress(poolUrl: string, listenUrl: string): boolean {
  const pool = parseDatabaseUrl(poolUrl);
  const listen = parseDatabaseUrl(listenUrl);
  return pool.kind === 'postgres' && listen.kind === 'postgres' && pool.host === listen.host && pool.port === listen.port;
}
