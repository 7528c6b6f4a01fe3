import { runClaimPlanConformance } from './run-conformance.js';
import { postgresStand } from './stands/postgres-stand.js';

await runClaimPlanConformance(postgresStand);
