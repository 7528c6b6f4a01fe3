import { ConnectionError, StatementError } from '../errors.js';
import type { PoolLedger } from './pool-ledger.js';

/** How a driver hands a session back to its pool. */
export interface LoanEnding {
  /** Returns the session for reuse. */
  release(): void;
  /** Ends the session on the server. */
  destroy(): void;
}

/** The ending of a connection the service lent us: its owner releases it, not we. */
export const LEAVE_TO_OWNER: LoanEnding = Object.freeze({ release: () => undefined, destroy: () => undefined });

export interface ConnectionLoanOptions {
  /** Undefined for a connection the service lent us: it is not counted. */
  readonly ledger: PoolLedger | undefined;
  readonly ending: LoanEnding;
  /** The database kind, for error messages. */
  readonly database: string;
  /**
   * Turns a client library's error into a `StatementError`. A session that is gone must get a
   * class 08 SQLSTATE (see `isConnectionLost`) so that the loan destroys it.
   */
  readonly describeFailure: (error: unknown, statementName: string) => StatementError;
  /** Called once when the loan ends, after the ledger counted it (the pool gate's `leave`). */
  readonly onEnded?: () => void;
}

/** Postgres codes for a session the server ended: admin_shutdown, crash_shutdown, cannot_connect_now. */
const SESSION_ENDED_SQLSTATES = new Set(['57P01', '57P02', '57P03']);

/**
 * Whether an error means the connection to the database is gone (a server restart, a killed
 * session, a network failure): the work may be retried on a fresh connection once the server
 * answers again.
 */
export function isConnectionLost(error: unknown): boolean {
  if (error instanceof ConnectionError) return true;
  if (!(error instanceof StatementError) || error.sqlState === undefined) return false;
  return error.sqlState.startsWith('08') || SESSION_ENDED_SQLSTATES.has(error.sqlState);
}

/**
 * One connection's loan, from acquire until release or destroy; exactly one of them ends it and
 * later calls do nothing. Statements run through `run`, which wraps a failure once and appends
 * the caller's stack. The session is destroyed instead of returned when its state is unknown:
 * its connection was lost, or it is released while a statement is still running.
 */
export class ConnectionLoan {
  readonly #options: ConnectionLoanOptions;
  #isEnded = false;
  #isBroken = false;
  #runningCount = 0;

  constructor(options: ConnectionLoanOptions) {
    this.#options = options;
    options.ledger?.countLent();
  }

  get isEnded(): boolean {
    return this.#isEnded;
  }

  /** Whether a statement runs on the connection now. */
  get isRunning(): boolean {
    return this.#runningCount > 0;
  }

  /** Called when the client library reports the session failed between statements. */
  markBroken(): void {
    this.#isBroken = true;
  }

  /**
   * Runs one statement's work. A failure gets the frames of the callers that await it: an error
   * made here after the await carries them as `at async …` frames (V8's async stack traces), so
   * nothing is made ahead for a statement that succeeds. One made ahead on every statement cost
   * about 10 µs of CPU each (twelve frames deep, Node 20): 40 µs per message in the row lock
   * form's four statements. `caller` is one the caller made before its own first await instead.
   */
  async run<T>(statementName: string, work: () => Promise<T> | T, caller?: Error): Promise<T> {
    if (this.#isEnded) {
      throw withCallerStack(
        new StatementError({
          statement: statementName,
          database: this.#options.database,
          cause: new Error('the connection was already released or destroyed; acquire a new one'),
        }),
        caller ?? new Error(),
      );
    }
    this.#runningCount += 1;
    try {
      return await work();
    } catch (error) {
      // A failure described here is made after the await and has the callers' frames already;
      // one the work made elsewhere (a client library's callback) gets them appended.
      const isMadeHere = !(error instanceof StatementError);
      const failure = isMadeHere ? this.#options.describeFailure(error, statementName) : error;
      if (isConnectionLost(failure)) this.#isBroken = true;
      if (caller !== undefined) throw withCallerStack(failure, caller);
      throw isMadeHere ? failure : withCallerStack(failure, new Error());
    } finally {
      this.#runningCount -= 1;
    }
  }

  release(): void {
    this.#end(this.#isBroken || this.#runningCount > 0 ? 'destroy' : 'release');
  }

  destroy(): void {
    this.#end('destroy');
  }

  #end(how: 'release' | 'destroy'): void {
    if (this.#isEnded) return;
    this.#isEnded = true;
    this.#options.ledger?.countReturned();
    this.#options.ending[how]();
    this.#options.onEnded?.();
  }
}

/** Appends the frames of `caller` to the error's stack, so an async failure points at its caller. */
export function withCallerStack<E extends Error>(error: E, caller: Error): E {
  const callerFrames = caller.stack?.split('\n').slice(1).join('\n');
  if (callerFrames) error.stack = `${error.stack ?? String(error)}\n${callerFrames}`;
  return error;
}
