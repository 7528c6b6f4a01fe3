import { describe, expect, it } from 'vitest';
import { ConnectionError, StatementError } from '../errors.js';
import { ConnectionLoan, isConnectionLost } from './connection-loan.js';
import { PoolLedger } from './pool-ledger.js';

function createLoan(ledger = new PoolLedger()) {
  const endings: string[] = [];
  const loan = new ConnectionLoan({
    ledger,
    database: 'postgres',
    ending: { release: () => endings.push('release'), destroy: () => endings.push('destroy') },
    describeFailure: (error, statement) =>
      new StatementError({ statement, database: 'postgres', sqlState: (error as { code?: string }).code, cause: error }),
  });
  return { loan, endings, ledger };
}

function failWith(code: string): never {
  throw Object.assign(new Error(`failed with ${code}`), { code });
}

describe('ConnectionLoan', () => {
  it('ends once: a second release or destroy does nothing', () => {
    const { loan, endings, ledger } = createLoan();
    loan.release();
    loan.destroy();
    loan.release();
    expect(endings).toEqual(['release']);
    expect(ledger.held).toBe(0);
  });

  it('wraps a failure once in a StatementError and appends the caller stack', async () => {
    const { loan } = createLoan();
    const failure = await loan.run('lease.claim', () => failWith('42601')).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(StatementError);
    expect(failure).toMatchObject({ statement: 'lease.claim', sqlState: '42601' });
    expect((failure as Error).stack).toContain('connection-loan.test.ts');
  });

  it('destroys instead of releasing once the connection was lost', async () => {
    const { loan, endings } = createLoan();
    await loan.run('settle.finish', () => failWith('08006')).catch(() => undefined);
    loan.release();
    expect(endings).toEqual(['destroy']);
  });

  it('keeps a connection whose statement failed on the server', async () => {
    const { loan, endings } = createLoan();
    await loan.run('settle.finish', () => failWith('23505')).catch(() => undefined);
    loan.release();
    expect(endings).toEqual(['release']);
  });

  it('destroys a connection released while a statement is still running', async () => {
    const { loan, endings } = createLoan();
    let finish!: () => void;
    const running = loan.run('lease.claim', () => new Promise<void>((resolve) => (finish = resolve)));
    loan.release();
    finish();
    await running;
    expect(endings).toEqual(['destroy']);
  });

  it('refuses statements after the loan ended', async () => {
    const { loan } = createLoan();
    loan.release();
    await expect(loan.run('lease.claim', () => 'ran')).rejects.toThrowError(/already released/);
  });
});

describe('isConnectionLost', () => {
  it('recognises connection errors, class 08 and ended sessions', () => {
    const statementError = (sqlState: string | undefined) =>
      new StatementError({ statement: 's', database: 'postgres', sqlState, cause: new Error('x') });
    expect(isConnectionLost(new ConnectionError({ host: 'h:1', message: 'down' }))).toBe(true);
    expect(isConnectionLost(statementError('08S01'))).toBe(true);
    expect(isConnectionLost(statementError('57P01'))).toBe(true);
    expect(isConnectionLost(statementError('40001'))).toBe(false);
    expect(isConnectionLost(statementError(undefined))).toBe(false);
    expect(isConnectionLost(new Error('08006'))).toBe(false);
  });
});
