import { runGaleraConformance } from './run-conformance.js';
import { galeraStand } from './stands/galera-stand.js';

await runGaleraConformance(galeraStand);
