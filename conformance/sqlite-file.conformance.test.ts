import { runConformance } from './run-conformance.js';
import { sqliteFileStand } from './stands/sqlite-stand.js';

await runConformance(sqliteFileStand);
