import type { Dialect } from './dialect.js';
import { createMysqlDialect } from './mysql/mysql-dialect.js';
import { createPostgresDialect } from './postgres/postgres-dialect.js';
import { createSqliteDialect } from './sqlite/sqlite-dialect.js';

export type DialectChoice = 'postgres' | 'mysql' | 'mariadb' | 'sqlite';

/** The dialect for a database; MariaDB is the MySQL dialect with MariaDB's capabilities. */
export function createDialect(name: DialectChoice): Dialect {
  switch (name) {
    case 'postgres':
      return createPostgresDialect();
    case 'mysql':
      return createMysqlDialect({ mariadb: false });
    case 'mariadb':
      return createMysqlDialect({ mariadb: true });
    case 'sqlite':
      return createSqliteDialect();
  }
}
