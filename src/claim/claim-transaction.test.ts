import { describe, expect, it } from 'vitest';
import type { Connection, QueryResult } from '../driver/driver.js';
import { BatchRolledBackError, StatementError, TransactionEndedError } from '../errors.js';
import type { BoundStatement, Statement } from '../statement.js';
import { ClaimTransaction, MAX_FINISHES_PER_STATEMENT, type ClaimTransactionStatements } from './claim-transaction.js';

const statement = (name: string): Statement => ({ name, sql: name, params: ['id'] });
const sessionStatement = (name: string): Statement => ({ name, sql: name, params: [] });

const statements: ClaimTransactionStatements = {
  commit: sessionStatement('session.commit'),
  rollbackToSavepoint: sessionStatement('session.rollbackToSavepoint'),
  settlements: {
    finish: [statement('settle.finish')],
    retry: [statement('rowLock.retry')],
    retryAfter: [statement('rowLock.retryAfter')],
    deadLetter: [statement('settle.deadLetter')],
  },
  finishMany: (rowCount) => ({ name: 'rowLock.finishMany', sql: 'rowLock.finishMany', params: Array<'id'>(rowCount).fill('id') }),
};

/** A connection that records what ran on it and fails the statements it is told to. */
class RecordingConnection implements Connection {
  readonly ran: string[] = [];
  ending: 'released' | 'destroyed' | undefined;
  readonly #failing = new Set<string>();

  failOn(name: string): void {
    this.#failing.add(name);
  }

  async execute(bound: BoundStatement): Promise<QueryResult> {
    if (this.#failing.has(bound.name)) {
      throw new StatementError({ statement: bound.name, database: 'test', cause: new Error('refused by the test') });
    }
    const what = bound.name === 'context.tx.query' ? bound.sql : bound.name;
    this.ran.push(bound.values.length > 0 ? `${what} ${bound.values.map(String).join(',')}` : what);
    return { rows: [], affectedRows: 1, columns: [] };
  }

  async prepare(): Promise<void> {}

  release(): void {
    this.ending ??= 'released';
  }

  destroy(): void {
    this.ending ??= 'destroyed';
  }
}

function claimOf(rowCount: number, transactional = false) {
  const connection = new RecordingConnection();
  const transaction = new ClaimTransaction({ statements, connection, rowCount, subscription: 'jobs/emails', transactional });
  const rows = Array.from({ length: rowCount }, (_, index) =>
    transaction.hold({ row: {}, id: String(index + 1), idValue: index + 1, attempt: 1 }),
  );
  return { connection, rows };
}

describe('ClaimTransaction batches (row lock form)', () => {
  it('settles every row of a batch in one transaction, each only once the last one committed; the finishes go together last', async () => {
    const { connection, rows } = claimOf(3);
    const settled: string[] = [];
    const first = rows[0]!.settle({ kind: 'finish' }).then(() => settled.push('1'));
    const second = rows[1]!.settle({ kind: 'retry' }).then(() => settled.push('2'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toEqual([]);
    await rows[2]!.settle({ kind: 'finish' });
    await Promise.all([first, second]);
    expect(connection.ran).toEqual(['rowLock.retry 2', 'rowLock.finishMany 1,3', 'session.commit']);
    expect(connection.ending).toBe('released');
  });

  it('pads the grouped finish to a power of two with the last id, and splits it past the row limit', async () => {
    const three = claimOf(3);
    await Promise.all(three.rows.map((row) => row.settle({ kind: 'finish' })));
    expect(three.connection.ran).toEqual(['rowLock.finishMany 1,2,3,3', 'session.commit']);
    const many = claimOf(MAX_FINISHES_PER_STATEMENT + 3);
    await Promise.all(many.rows.map((row) => row.settle({ kind: 'finish' })));
    const counts = many.connection.ran.map((ran) => (ran === 'session.commit' ? ran : ran.split(',').length));
    expect(counts).toEqual([MAX_FINISHES_PER_STATEMENT, 4, 'session.commit']);
  });

  it('a failed grouped finish fails every finished row with its error, and rolls back the others', async () => {
    const { connection, rows } = claimOf(3);
    connection.failOn('rowLock.finishMany');
    const first = rows[0]!.settle({ kind: 'finish' });
    const second = rows[1]!.settle({ kind: 'retry' });
    const third = rows[2]!.settle({ kind: 'finish' });
    await expect(first).rejects.toBeInstanceOf(StatementError);
    await expect(third).rejects.toBeInstanceOf(StatementError);
    await expect(second).rejects.toBeInstanceOf(BatchRolledBackError);
    expect(connection.ran).toEqual(['rowLock.retry 2']);
    expect(connection.ending).toBe('destroyed');
  });

  it('rolls the whole batch back when one settlement fails: that row gets its error, the others BatchRolledBackError', async () => {
    const { connection, rows } = claimOf(3);
    const first = rows[0]!.settle({ kind: 'finish' });
    connection.failOn('rowLock.retry');
    const second = rows[1]!.settle({ kind: 'retry' });
    const third = rows[2]!.settle({ kind: 'finish' });
    await expect(second).rejects.toBeInstanceOf(StatementError);
    for (const [row, outcome] of [
      ['1', first],
      ['3', third],
    ] as const) {
      const error = await outcome.catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(BatchRolledBackError);
      expect(error).toMatchObject({ id: row, subscription: 'jobs/emails', code: 'BATCH_ROLLED_BACK' });
      expect((error as Error).cause).toBeInstanceOf(StatementError);
    }
    expect(connection.ran).toEqual([]);
    expect(connection.ending).toBe('destroyed');
  });

  it('a failed commit fails the row that ran it and rolls back the others', async () => {
    const { connection, rows } = claimOf(2);
    connection.failOn('session.commit');
    const first = rows[0]!.settle({ kind: 'finish' });
    await expect(rows[1]!.settle({ kind: 'finish' })).rejects.toBeInstanceOf(StatementError);
    await expect(first).rejects.toBeInstanceOf(BatchRolledBackError);
    expect(connection.ending).toBe('destroyed');
  });
});

describe('ClaimTransaction in transactional mode', () => {
  it('commits the handler writes with an ack, and runs what waits for the commit', async () => {
    const { connection, rows } = claimOf(1, true);
    const transaction = rows[0]!.transaction!;
    await transaction.query('INSERT handler row');
    const afterCommit: string[] = [];
    transaction.afterCommit(() => afterCommit.push('woken'));
    await rows[0]!.settle({ kind: 'finish', commitsHandlerWrites: true });
    expect(connection.ran).toEqual(['INSERT handler row', 'settle.finish 1', 'session.commit']);
    expect(afterCommit).toEqual(['woken']);
    await expect(transaction.query('INSERT too late')).rejects.toBeInstanceOf(TransactionEndedError);
  });

  it.each([
    ['retry', { kind: 'retry' }, 'rowLock.retry 1'],
    ['drop', { kind: 'finish' }, 'settle.finish 1'],
    ['dead letter', { kind: 'deadLetter', target: { kind: 'group', group: 'failed' }, lastError: 'smtp refused' }, 'settle.deadLetter 1'],
  ] as const)('rolls the handler writes back to the savepoint before a %s', async (_, settlement, settles) => {
    const { connection, rows } = claimOf(1, true);
    const transaction = rows[0]!.transaction!;
    await transaction.query('INSERT handler row');
    const afterCommit: string[] = [];
    transaction.afterCommit(() => afterCommit.push('woken'));
    await rows[0]!.settle(settlement);
    expect(connection.ran).toEqual(['INSERT handler row', 'session.rollbackToSavepoint', settles, 'session.commit']);
    expect(afterCommit).toEqual([]);
  });

  it('rolls the handler writes back before handing the row back', async () => {
    const { connection, rows } = claimOf(1, true);
    await rows[0]!.handBack();
    expect(connection.ran).toEqual(['session.rollbackToSavepoint', 'session.commit']);
    await expect(rows[0]!.transaction!.query('SELECT 1')).rejects.toBeInstanceOf(TransactionEndedError);
  });

  it('ends the whole transaction when the rollback to the savepoint fails', async () => {
    const { connection, rows } = claimOf(1, true);
    connection.failOn('session.rollbackToSavepoint');
    await expect(rows[0]!.settle({ kind: 'retry' })).rejects.toBeInstanceOf(StatementError);
    expect(connection.ran).toEqual([]);
    expect(connection.ending).toBe('destroyed');
  });

  it('lends a transaction to one row only', () => {
    expect(() => claimOf(2, true)).toThrow(/single deliveries/);
  });
});

/** As RecordingConnection, for a client that pipelines: each `executeEach` is one write, recorded whole. */
class PipeliningConnection extends RecordingConnection {
  readonly writes: string[][] = [];

  /** As PostgreSQL answers a pipeline: each statement runs, even after one before it failed. */
  executeEach(statements: readonly BoundStatement[]): Promise<QueryResult>[] {
    this.writes.push(statements.map((bound) => bound.name));
    return statements.map((bound) => this.execute(bound).then((result) => (bound.name === 'rowLock.claim' ? { ...result, rows: [{ id: 9 }] } : result)));
  }
}

describe('ClaimTransaction chained claims (row lock form, a client that pipelines)', () => {
  function chainedClaimOf() {
    const connection = new PipeliningConnection();
    const heard: string[] = [];
    let handedOn: { connection: Connection; rows: Record<string, unknown>[] } | undefined;
    const transaction = new ClaimTransaction({
      statements,
      connection,
      rowCount: 1,
      subscription: 'jobs/emails',
      transactional: false,
      chainClaim: () => ({
        statements: [
          { name: 'session.begin', sql: 'BEGIN', values: [] },
          { name: 'rowLock.claim', sql: 'SELECT', values: [] },
        ],
        claimed: async (on, rows) => {
          handedOn = { connection: on, rows };
          heard.push('claimed');
        },
        failed: () => heard.push('failed'),
        abandoned: () => heard.push('abandoned'),
      }),
    });
    const row = transaction.hold({ row: {}, id: '1', idValue: 1, attempt: 1 });
    return { connection, row, heard, handedOn: () => handedOn };
  }

  it('writes the next claim with the settlement and its COMMIT, and hands it the connection instead of releasing it', async () => {
    const { connection, row, heard, handedOn } = chainedClaimOf();
    await row.settle({ kind: 'finish' });
    expect(connection.writes).toEqual([['settle.finish', 'session.commit', 'session.begin', 'rowLock.claim']]);
    expect(heard).toEqual(['claimed']);
    expect(handedOn()).toEqual({ connection, rows: [{ id: 9 }] });
    expect(connection.ending).toBeUndefined();
  });

  it('a settlement that fails abandons the chained claim and ends the session: the row goes back', async () => {
    const { connection, row, heard } = chainedClaimOf();
    connection.failOn('settle.finish');
    await expect(row.settle({ kind: 'finish' })).rejects.toBeInstanceOf(StatementError);
    expect(heard).toEqual(['abandoned']);
    expect(connection.ending).toBe('destroyed');
  });

  it('a chained claim that fails leaves the settlement committed: the claim is told, and the session ends', async () => {
    const { connection, row, heard } = chainedClaimOf();
    connection.failOn('rowLock.claim');
    await row.settle({ kind: 'finish' });
    expect(connection.ran).toEqual(['settle.finish 1', 'session.commit', 'session.begin']);
    expect(heard).toEqual(['failed']);
    expect(connection.ending).toBe('destroyed');
  });
});
