import { runConformance } from './run-conformance.js';
import { postgresStand } from './stands/postgres-stand.js';

await runConformance(postgresStand);
