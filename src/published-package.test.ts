import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDashboardScript } from './dashboard/dashboard-script-loader.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface PackResult {
  readonly filename: string;
  readonly files: readonly { readonly path: string }[];
}

function run(command: string, args: readonly string[], cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function runOrThrow(command: string, args: readonly string[], cwd: string): Promise<{ stdout: string; stderr: string }> {
  const result = await run(command, args, cwd);
  if (result.code !== 0) throw new Error(`${command} ${args.join(' ')} exited ${result.code}:\n${result.stderr}`);
  return result;
}

// The tarball's dependencies come from npm's cache where it has them, from the registry otherwise:
// `npm ci` caches the tarballs it installs but not the registry's documents that an install of a
// range needs, so `--offline` failed with ENOTCACHED on a machine that had run nothing else.
const INSTALL = ['install', '--no-audit', '--no-fund', '--prefer-offline'];

// `npm pack` builds dist/ (prepack) and packs it: about 15 s on 2 cores, once for the whole file.
describe('the published package', { timeout: 120_000 }, () => {
  let folder: string;
  let pack: PackResult;
  let tarball: string;

  beforeAll(async () => {
    folder = await mkdtemp(join(tmpdir(), 'tq-package-'));
    const { stdout } = await runOrThrow('npm', ['pack', '--json', '--pack-destination', folder], ROOT);
    pack = (JSON.parse(stdout) as PackResult[])[0]!;
    tarball = join(folder, pack.filename);
  }, 180_000);

  afterAll(async () => {
    await rm(folder, { recursive: true, force: true });
  });

  it('holds the build, the docs the README links to, and nothing of the checkout', async () => {
    const paths = pack.files.map((file) => file.path);
    expect(paths).toEqual(
      expect.arrayContaining(['package.json', 'README.md', 'dist/index.js', 'dist/index.d.ts', 'dist/cli/cli.js', 'dist/dashboard/browser/dashboard-script.js']),
    );
    const outside = paths.filter(
      (path) => !['package.json', 'README.md', 'ARCHITECTURE.md'].includes(path) && !/^(dist\/.*\.(js|d\.ts)|docs\/[^/]+|examples\/[^/]+\.(ts|md))$/.test(path),
    );
    expect(outside).toEqual([]);
    // Maps would point at sources the package does not hold; tests, fixtures and the bench command stay in the checkout.
    expect(paths.filter((path) => /\.map$|\.test\.|\.fixture\.|bench-command/.test(path))).toEqual([]);

    const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
    const relativeLinks = [...readme.matchAll(/\]\((?!https?:|#)([^)#\s]+)/g)].map((match) => match[1]!);
    expect(relativeLinks.length).toBeGreaterThan(0);
    expect(relativeLinks.filter((link) => !paths.includes(link))).toEqual([]);
  });

  it('runs no script when it is installed, and require() loads it from a CommonJS project', async () => {
    const project = join(folder, 'commonjs-project');
    await mkdir(project);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'commonjs-project', private: true, type: 'commonjs' }));
    const installed = await runOrThrow('npm', [...INSTALL, tarball], project);
    expect(installed.stderr).not.toMatch(/install-scripts|prepare/);

    const manifest = JSON.parse(await readFile(join(project, 'node_modules', 'tablequeue', 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>;
    };
    const installScripts = ['preinstall', 'install', 'postinstall', 'prepare'].filter((name) => manifest.scripts?.[name] !== undefined);
    expect(installScripts).toEqual([]);

    const script = [
      "const { Broker, defineTable, Outcome } = require('tablequeue');",
      "const table = defineTable({ table: 'jobs', id: 'id', lockedUntil: 'locked_until', payload: 'payload' });",
      "console.log(typeof Broker, typeof Outcome.ack, table.createTableSql('sqlite')[0].slice(0, 12));",
    ].join('\n');
    const required = await runOrThrow(process.execPath, ['-e', script], project);
    expect(required.stdout.trim()).toBe('function function CREATE TABLE');

    const testing = "const { startTestBroker, TestBroker } = require('tablequeue/testing'); console.log(typeof startTestBroker, typeof TestBroker);";
    expect((await runOrThrow(process.execPath, ['-e', testing], project)).stdout.trim()).toBe('function function');

    const dialectKit = [
      "const { builtInDialect, defineDialect } = require('tablequeue');",
      "const { checkDialectStatements } = require('tablequeue/testing');",
      "const own = defineDialect({ basedOn: 'mariadb', label: 'own', interfaceVersion: 1, overrides: { capabilities: { supportsSessionLocks: false } } });",
      'console.log(checkDialectStatements(own).problems.length, checkDialectStatements(builtInDialect(\'postgres\')).overridden.length);',
    ].join('\n');
    expect((await runOrThrow(process.execPath, ['-e', dialectKit], project)).stdout.trim()).toBe('0 0');
  });

  it('typechecks in a strict ESM TypeScript project that has none of the optional peers installed', async () => {
    const project = join(folder, 'typescript-project');
    await mkdir(project);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'typescript-project', private: true, type: 'module' }));
    await runOrThrow('npm', [...INSTALL, tarball], project);
    const compilerOptions = {
      target: 'ES2022',
      module: 'nodenext',
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: false,
      noEmit: true,
      // Only @types/node from the checkout: the project itself has no pg, mysql2, better-sqlite3,
      // nats, amqplib or @opentelemetry/api for tablequeue's declarations to lean on.
      typeRoots: [join(ROOT, 'node_modules', '@types')],
      types: ['node'],
    };
    await writeFile(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['main.ts'] }));
    const program = [
      "import { Broker, defineTable, Outcome, type PublishItem } from 'tablequeue';",
      "const jobs = defineTable({ table: 'jobs', id: 'id', group: 'queue', retryAfter: 'retry_after', lockedUntil: 'locked_until', payload: 'payload' });",
      "const welcome = jobs.queue<{ to: string }>('welcome');",
      "const broker = new Broker({ database: 'sqlite::memory:' });",
      'broker.subscribe(welcome, async (message) => (message.payload.to.length > 0 ? Outcome.ack() : Outcome.drop()));',
      "const items: PublishItem<{ to: string }>[] = [{ payload: { to: 'a@example.com' }, delayMs: 1_000 }];",
      'export const written: Promise<number> = broker.publishMany(welcome, items);',
      "import { startTestBroker, type HandlerRecorder, type RecordedSettlement } from 'tablequeue/testing';",
      'const harness = await startTestBroker({ tables: [jobs] });',
      'const recorder: HandlerRecorder<{ to: string }> = harness.record(welcome, (message) => (message.payload.to === \'\' ? Outcome.drop() : undefined));',
      "export const settled: Promise<readonly RecordedSettlement[]> = recorder.waitForSettled({ outcome: 'ack', count: 1 });",
      "import { defineDialect, DIALECT_INTERFACE_VERSION, type Dialect, type Statement } from 'tablequeue';",
      "import { checkDialectStatements, type DialectStatementsReport } from 'tablequeue/testing';",
      'const own: Dialect = defineDialect({',
      "  basedOn: 'postgres',",
      "  label: 'own',",
      '  interfaceVersion: 1,',
      '  overrides: (postgres) => ({',
      "    lease: { extend: (spec): Statement => ({ ...postgres.lease.extend(spec), sql: `/* own */ ${postgres.lease.extend(spec).sql}` }) },",
      '  }),',
      '});',
      "export const versions: number[] = [own.interfaceVersion, DIALECT_INTERFACE_VERSION];",
      "export const report: DialectStatementsReport = checkDialectStatements(own);",
      "export const ownBroker = new Broker({ database: 'postgres://localhost/app', dialect: own });",
    ].join('\n');
    await writeFile(join(project, 'main.ts'), program);
    const compiled = await run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project], project);
    expect(compiled.stdout + compiled.stderr).toBe('');
    expect(compiled.code).toBe(0);
  });

  it('runs tablequeue/testing under node:test and Jest from the installed tarball, SQLite in memory', async () => {
    const project = join(folder, 'testing-project');
    await mkdir(project);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'testing-project', private: true, type: 'module' }));
    await runOrThrow('npm', [...INSTALL, tarball], project);
    // The user's own better-sqlite3 (an optional peer), linked from the checkout rather than built again here.
    await symlink(join(ROOT, 'node_modules', 'better-sqlite3'), join(project, 'node_modules', 'better-sqlite3'), 'dir');
    const frameworks = join(ROOT, 'src', 'testing', 'frameworks');
    for (const file of ['harness-scenarios.mjs', 'harness.node-test.mjs', 'harness.jest.test.mjs']) {
      await copyFile(join(frameworks, file), join(project, file));
    }

    const nodeTest = await run(process.execPath, ['--test', '--test-reporter=tap', 'harness.node-test.mjs'], project);
    expect(nodeTest.stdout + nodeTest.stderr).toMatch(/^# pass 5$/m);
    expect(nodeTest.code).toBe(0);

    // Jest runs ES modules only through Node's vm modules; no transform, the package is plain JS.
    await writeFile(join(project, 'jest.config.json'), JSON.stringify({ testEnvironment: 'node', transform: {}, testMatch: ['<rootDir>/*.jest.test.mjs'] }));
    const jest = await run(
      process.execPath,
      ['--experimental-vm-modules', '--no-warnings', join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js'), '--config', 'jest.config.json', '--ci'],
      project,
    );
    expect(jest.stdout + jest.stderr).toMatch(/^Tests: +5 passed, 5 total$/m);
    expect(jest.code).toBe(0);
  });

  it("serves the dashboard's page script as the build compiled it, the same the sources compile to", async () => {
    const project = join(folder, 'dashboard-project');
    await mkdir(project);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'dashboard-project', private: true, type: 'module' }));
    await runOrThrow('npm', [...INSTALL, tarball], project);
    const loader = pathToFileURL(join(project, 'node_modules', 'tablequeue', 'dist', 'dashboard', 'dashboard-script-loader.js')).href;
    const program = `const { loadDashboardScript } = await import(${JSON.stringify(loader)}); process.stdout.write(await loadDashboardScript());`;
    const served = await runOrThrow(process.execPath, ['--input-type=module', '-e', program], project);
    expect(served.stdout).toBe(await loadDashboardScript());
  });

  it('installs the tablequeue command without the checkout-only bench command', async () => {
    const project = join(folder, 'command-project');
    await mkdir(project);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'command-project', private: true }));
    await runOrThrow('npm', [...INSTALL, tarball], project);
    const help = await run(join(project, 'node_modules', '.bin', 'tablequeue'), ['--help'], project);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^ {2}demo /m);
    expect(help.stdout).not.toMatch(/bench/);
    const bench = await run(join(project, 'node_modules', '.bin', 'tablequeue'), ['bench'], project);
    expect(bench.code).toBe(2);
    expect(bench.stderr).toMatch(/unknown command "bench"/);
  });
});
