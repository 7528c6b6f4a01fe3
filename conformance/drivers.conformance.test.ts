import { requireLive } from './require-live.js';
import { allStands } from './stands/all-stands.js';
import { driverSuite } from './suites/driver.suite.js';

for (const stand of allStands) await requireLive(stand, driverSuite);
