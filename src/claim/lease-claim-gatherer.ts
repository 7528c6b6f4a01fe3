import { createDeferred, type Deferred } from '../internal/deferred.js';
import type { HeldRow } from './claim-form.js';

interface WaitingClaim {
  readonly limit: number;
  readonly answer: Deferred<HeldRow[]>;
}

/**
 * Claims asked for in the same event-loop turn run as one statement for all their rows. The
 * claim loop starts one claim per idle worker, each for one row on Postgres; at 16 workers that
 * was one claim statement per message. Gathered, the rows are shared out in the order the claims
 * were asked for; a claim the rows do not reach gets none (an empty claim). When the statement
 * fails, the first claim gets the error and the others come back empty, so one failure is
 * reported once.
 */
export class LeaseClaimGatherer {
  readonly #claim: (limit: number, now: Date) => Promise<HeldRow[]>;
  #waiting: WaitingClaim[] = [];
  #now: Date | undefined;

  constructor(claim: (limit: number, now: Date) => Promise<HeldRow[]>) {
    this.#claim = claim;
  }

  claim(limit: number, now: Date): Promise<HeldRow[]> {
    const answer = createDeferred<HeldRow[]>();
    this.#waiting.push({ limit, answer });
    if (this.#waiting.length === 1) {
      this.#now = now;
      setImmediate(() => void this.#run());
    }
    return answer.promise;
  }

  async #run(): Promise<void> {
    const waiting = this.#waiting;
    const now = this.#now!;
    this.#waiting = [];
    let rows: HeldRow[];
    try {
      rows = await this.#claim(
        waiting.reduce((sum, claim) => sum + claim.limit, 0),
        now,
      );
    } catch (error) {
      waiting.forEach((claim, index) => (index === 0 ? claim.answer.reject(error) : claim.answer.resolve([])));
      return;
    }
    let offset = 0;
    for (const claim of waiting) {
      claim.answer.resolve(rows.slice(offset, offset + claim.limit));
      offset += claim.limit;
    }
  }
}
