import { runPoolerConformance } from './run-conformance.js';
import { pgbouncerTransactionStand } from './stands/pgbouncer-stand.js';

await runPoolerConformance(pgbouncerTransactionStand);
