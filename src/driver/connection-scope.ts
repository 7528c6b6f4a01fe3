import { bindStatement, type BoundStatement, type Statement } from '../statement.js';
import type { Connection, Driver, QueryResult } from './driver.js';
import type { AcquireOptions } from './pool-gate.js';

/** The statements that open and end a transaction, as the dialect renders them. */
export interface TransactionStatements {
  readonly begin: readonly Statement[];
  readonly commit: Statement;
  readonly rollback: Statement;
}

/** What `inTransaction`'s work may do besides letting the transaction commit. */
export interface OpenTransaction {
  /** Rolls back now; nothing is committed afterwards. A failed rollback destroys the connection. */
  rollBack(): Promise<void>;
  /**
   * Runs the transaction's last statement and its COMMIT together (`executeAll`: one round trip
   * where the client pipelines), and returns the statement's result; nothing runs afterwards.
   */
  commitWith(statement: BoundStatement): Promise<QueryResult>;
}

export interface InTransactionOptions<T> {
  /**
   * Answers instead of throwing when the BEGIN itself fails, which opened nothing (the relay on a
   * session the service holds in a transaction of its own: see `sharesSessionWithService`).
   */
  readonly whenBeginRefused?: () => T;
}

/** `Connection.executeAll` where the connection has it, else `executeInTurn`. */
export function executeAll(connection: Connection, statements: readonly BoundStatement[]): Promise<QueryResult[]> {
  return connection.executeAll !== undefined ? connection.executeAll(statements) : executeInTurn(connection, statements);
}

/** The statements one after another: the first failure stops the rest. */
export async function executeInTurn(connection: Connection, statements: readonly BoundStatement[]): Promise<QueryResult[]> {
  const results: QueryResult[] = [];
  for (const statement of statements) results.push(await connection.execute(statement));
  return results;
}

/**
 * Lends a connection to `work` and ends the loan exactly once: released when `work` resolves,
 * destroyed when it throws, since the session's state is then unknown. Work that hands the
 * connection on (a claim whose transaction stays open through the handler) calls `keep()`: once
 * it resolves, whoever it handed the connection to ends the loan; a throw still destroys it.
 */
export async function withConnection<T>(
  driver: Pick<Driver, 'acquire'>,
  work: (connection: Connection, keep: () => void) => Promise<T>,
  options?: AcquireOptions,
): Promise<T> {
  const connection = await driver.acquire(options);
  let isKept = false;
  let result: T;
  try {
    result = await work(connection, () => {
      isKept = true;
    });
  } catch (error) {
    connection.destroy();
    throw error;
  }
  if (!isKept) connection.release();
  return result;
}

export interface WithTransactionOptions<T> extends InTransactionOptions<T> {
  /** How the connection is acquired: its purpose, and what its commit must survive. */
  readonly acquire?: AcquireOptions;
}

/** `inTransaction` on a connection of its own (`withConnection`). */
export function withTransaction<T>(
  driver: Pick<Driver, 'acquire'>,
  statements: TransactionStatements,
  work: (transaction: OpenTransaction, connection: Connection) => Promise<T>,
  options?: WithTransactionOptions<T>,
): Promise<T> {
  return withConnection(driver, (connection) => inTransaction(connection, statements, work, options), options?.acquire);
}

/**
 * Runs `work` inside a transaction on `connection`: begin, work, commit. The transaction ends
 * exactly once on every path: committed once `work` resolves (unless it rolled back); rolled back
 * when `work` or the commit throws, and the error rethrown. A rollback that fails destroys the
 * connection, and the server rolls back as the session ends. So the connection is left with no
 * transaction open, or destroyed.
 */
export async function inTransaction<T>(
  connection: Connection,
  statements: TransactionStatements,
  work: (transaction: OpenTransaction, connection: Connection) => Promise<T>,
  options?: InTransactionOptions<T>,
): Promise<T> {
  try {
    for (const statement of statements.begin) await connection.execute(bindStatement(statement, {}));
  } catch (error) {
    if (options?.whenBeginRefused === undefined) throw error;
    return options.whenBeginRefused();
  }
  let isOpen = true;
  const rollBack = async (): Promise<void> => {
    if (!isOpen) return;
    isOpen = false;
    try {
      await connection.execute(bindStatement(statements.rollback, {}));
    } catch {
      connection.destroy();
    }
  };
  const commitWith = async (statement: BoundStatement): Promise<QueryResult> => {
    const [result] = await executeAll(connection, [statement, bindStatement(statements.commit, {})]);
    isOpen = false;
    return result!;
  };
  try {
    const result = await work({ rollBack, commitWith }, connection);
    if (isOpen) {
      await connection.execute(bindStatement(statements.commit, {}));
      isOpen = false;
    }
    return result;
  } catch (error) {
    await rollBack();
    throw error;
  }
}
