import { runConformance } from './run-conformance.js';
import { sqliteMemoryStand } from './stands/sqlite-stand.js';

await runConformance(sqliteMemoryStand);
