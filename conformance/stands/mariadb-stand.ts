import { createMysqlFamilyStand } from './mysql-family-stand.js';

export const MARIADB_URL_VARIABLE = 'MARIADB_URL';
const DEFAULT_MARIADB_URL = 'mysql://root@127.0.0.1:3306/test';

export const mariadbStand = createMysqlFamilyStand({
  name: 'mariadb',
  serverUrl: process.env[MARIADB_URL_VARIABLE] ?? DEFAULT_MARIADB_URL,
});
