import { parseArgs } from 'node:util';
import { openDialect } from '../broker/open-dialect.js';
import { defineTable } from '../definition/define-table.js';
import type { DdlDialectName } from '../definition/define-table.js';
import { checkMysqlServerVersion } from '../dialect/mysql/mysql-dialect.js';
import { createDriver } from '../driver/create-driver.js';
import type { Driver } from '../driver/driver.js';
import { parseDatabaseUrl } from '../driver/database-url.js';
import { bindStatement } from '../statement.js';
import type { TableDeclaration } from '../table/table-spec.js';
import { DATABASE_FLAGS, DATABASE_FLAGS_HELP, databaseUrlOf } from './inspector-flags.js';
import { UsageError } from './usage-error.js';

const INIT_USAGE = `usage: tablequeue init --database URL --table NAME [options]

Creates a queue table and its claim-order index. The default layout has an id, a queue (group)
column, priority, retry_after, attempt, headers and payload; the options change it.

${DATABASE_FLAGS_HELP}
  --table NAME              the table to create
  --schema NAME             the schema (PostgreSQL) or database (MySQL) it goes in
  --lease                   add locked_until: the lease form (required on SQLite)
  --mark                    add processed_at: ack marks rows instead of deleting them
  --fifo                    make the queue column a FIFO group column
  --partition-key           add a partition_key column for keyed lanes
  --no-group                no queue column: the whole table is one queue
  --row-mode                no payload column: handlers receive the row
  --print                   print the SQL instead of running it (needs only the URL's scheme:
                            mysql:// prints MySQL's spelling, mariadb:// MariaDB's)
  -h, --help                this help`;

export async function runInitCommand(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      ...DATABASE_FLAGS,
      table: { type: 'string' },
      schema: { type: 'string' },
      lease: { type: 'boolean' },
      mark: { type: 'boolean' },
      fifo: { type: 'boolean' },
      'partition-key': { type: 'boolean' },
      'no-group': { type: 'boolean' },
      'row-mode': { type: 'boolean' },
      print: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    console.log(INIT_USAGE);
    return 0;
  }
  const database = databaseUrlOf('init', values, INIT_USAGE);
  if (values.table === undefined) throw new UsageError(`init needs --table\n\n${INIT_USAGE}`);
  if (values.fifo && values['no-group']) throw new UsageError('--fifo needs the queue column; drop --no-group');

  const declaration: TableDeclaration = { table: values.table, id: 'id' };
  if (values.schema !== undefined) declaration.schema = values.schema;
  if (!values['no-group']) declaration.group = values.fifo ? { column: 'queue', fifo: true } : 'queue';
  declaration.priority = 'priority';
  if (values['partition-key']) declaration.partitionKey = 'partition_key';
  declaration.retryAfter = 'retry_after';
  declaration.attempt = 'attempt';
  if (values.mark) declaration.processedAt = 'processed_at';
  if (values.lease) declaration.lockedUntil = 'locked_until';
  declaration.headers = 'headers';
  if (!values['row-mode']) declaration.payload = 'payload';

  const table = defineTable(declaration);
  if (values.print) {
    console.log(`${table.createTableSql(ddlDialectOf(database)).join(';\n\n')};`);
    return 0;
  }
  const driver = createDriver(database);
  await driver.open();
  let statementCount: number;
  try {
    // The server, not the URL's scheme, says MySQL or MariaDB: a mysql:// URL reaches either,
    // and their DDL differs (collations MariaDB does not have, say).
    const statements = table.createTableSql(await ddlDialectOfServer(driver));
    for (const [index, sql] of statements.entries()) {
      await driver.execute({ name: `init.${index === 0 ? 'createTable' : 'createIndex'}`, sql, values: [] });
    }
    statementCount = statements.length;
  } finally {
    await driver.close();
  }
  console.log(`created ${declaration.schema === undefined ? '' : `${declaration.schema}.`}${values.table} (${statementCount} statements)`);
  return 0;
}

/** The server's own flavour, its version checked against the floors as a broker's start does. */
async function ddlDialectOfServer(driver: Driver): Promise<DdlDialectName> {
  const dialect = await openDialect(driver);
  if (dialect.name !== 'mysql') return dialect.name;
  const result = await driver.execute(bindStatement(dialect.session.serverVersion(), {}));
  return checkMysqlServerVersion(String(result.rows[0]?.['version'] ?? '')).flavor;
}

/** For --print, which connects to nothing: the URL's scheme picks the spelling (mysql:// MySQL's, mariadb:// MariaDB's). */
function ddlDialectOf(url: string): DdlDialectName {
  const parsed = parseDatabaseUrl(url);
  if (parsed.kind === 'mysql') return url.startsWith('mariadb:') ? 'mariadb' : 'mysql';
  return parsed.kind;
}
