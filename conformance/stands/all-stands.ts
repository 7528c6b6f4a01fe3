import type { Stand } from '../stand.js';
import { mariadbStand } from './mariadb-stand.js';
import { postgresStand } from './postgres-stand.js';
import { sqliteFileStand, sqliteMemoryStand } from './sqlite-stand.js';

/** Every stand this machine can run. MySQL 8 has none yet: add `createMysqlFamilyStand({ name: 'mysql', … })`. */
export const allStands: readonly Stand[] = [postgresStand, mariadbStand, sqliteFileStand, sqliteMemoryStand];
