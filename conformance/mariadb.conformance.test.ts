import { runConformance } from './run-conformance.js';
import { mariadbStand } from './stands/mariadb-stand.js';

await runConformance(mariadbStand);
