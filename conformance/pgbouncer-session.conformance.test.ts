import { runPoolerConformance } from './run-conformance.js';
import { pgbouncerSessionStand } from './stands/pgbouncer-stand.js';

await runPoolerConformance(pgbouncerSessionStand);
