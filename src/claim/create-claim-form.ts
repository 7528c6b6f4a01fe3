import type { ClaimForm } from './claim-form.js';
import type { FormContext } from './form-context.js';
import { InProcessLockForm } from './in-process-lock-form.js';
import { LeaseForm, type LeaseFormOptions } from './lease-form.js';
import { RowLockForm } from './row-lock-form.js';
import { SessionLockForm } from './session-lock-form.js';

/**
 * The claim form a table declares: lease, row lock, or advisory lock, whose keys live in the
 * database's session locks where it has them and in the process's registry on SQLite.
 */
export function createClaimForm(context: FormContext, lease: LeaseFormOptions): ClaimForm {
  switch (context.spec.form) {
    case 'lease':
      return new LeaseForm(context, lease);
    case 'rowLock':
      return new RowLockForm(context);
    case 'advisory':
      return context.dialect.capabilities.supportsSessionLocks ? new SessionLockForm(context) : new InProcessLockForm(context);
  }
}
