import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

let loading: Promise<string> | undefined;

/**
 * The page script (`browser/dashboard-script.ts`) as the browser gets it, read once per process.
 * The package holds it compiled, beside this module, by `npm run build`, so an installed
 * dashboard reads a file and builds nothing. Run from the sources (tests, tsx), this module is
 * a `.ts` file and no compiled script sits beside it: the script is compiled here, alone, with
 * the options of its tsconfig.json and `typescript`, a development dependency.
 */
export function loadDashboardScript(): Promise<string> {
  loading ??= import.meta.url.endsWith('.ts') ? compileFromSource() : readFile(new URL('./browser/dashboard-script.js', import.meta.url), 'utf8');
  return loading;
}

async function compileFromSource(): Promise<string> {
  const { default: ts } = await import('typescript');
  const configPath = fileURLToPath(new URL('./browser/tsconfig.json', import.meta.url));
  const sourcePath = fileURLToPath(new URL('./browser/dashboard-script.ts', import.meta.url));
  const { config, error } = ts.readConfigFile(configPath, ts.sys.readFile);
  if (error !== undefined) throw new Error(ts.flattenDiagnosticMessageText(error.messageText, '\n'));
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, dirname(configPath));
  const output = ts.transpileModule(await readFile(sourcePath, 'utf8'), { compilerOptions: options, fileName: sourcePath, reportDiagnostics: true });
  const problems = output.diagnostics ?? [];
  if (problems.length > 0) {
    throw new Error(`the dashboard's page script does not compile: ${problems.map((problem) => ts.flattenDiagnosticMessageText(problem.messageText, ' ')).join('; ')}`);
  }
  return output.outputText;
}
