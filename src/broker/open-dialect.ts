import { createDialect } from '../dialect/create-dialect.js';
import type { Dialect } from '../dialect/dialect.js';
import { checkMysqlServerVersion } from '../dialect/mysql/mysql-dialect.js';
import { checkPostgresServerVersion } from '../dialect/postgres/postgres-dialect.js';
import { checkDialectProtocol } from '../dialect/service-dialect.js';
import { checkSqliteVersion } from '../dialect/sqlite/sqlite-dialect.js';
import type { Driver } from '../driver/driver.js';
import { bindStatement } from '../statement.js';

/**
 * Picks the dialect for the driver's database and checks the server against the floors
 * (PostgreSQL 11, MySQL 8.0.1, MariaDB 10.6, SQLite 3.35); the only place concrete dialects
 * are chosen at run time. A service's own dialect (`given`, already accepted by
 * `acceptServiceDialect`) must speak the database's protocol, and its own version check decides.
 */
export async function openDialect(driver: Driver, given?: Dialect): Promise<Dialect> {
  if (given !== undefined) {
    checkDialectProtocol(given, driver.kind, driver.description);
    given.checkServerVersion(await serverVersionOf(driver, given));
    return given;
  }
  const probe = createDialect(driver.kind === 'mysql' ? 'mysql' : driver.kind);
  const version = await serverVersionOf(driver, probe);
  switch (driver.kind) {
    case 'postgres':
      checkPostgresServerVersion(version);
      return probe;
    case 'sqlite':
      checkSqliteVersion(version);
      return probe;
    case 'mysql':
      return createDialect(checkMysqlServerVersion(version).flavor === 'mariadb' ? 'mariadb' : 'mysql');
  }
}

async function serverVersionOf(driver: Driver, dialect: Dialect): Promise<string> {
  const result = await driver.execute(bindStatement(dialect.session.serverVersion(), {}));
  return String(result.rows[0]?.['version'] ?? '');
}
