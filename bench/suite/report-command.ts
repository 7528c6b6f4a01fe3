import { readFile, writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { UsageError } from '../command-line.js';
import { renderSuiteChart } from './suite-chart.js';
import { formatSuiteMarkdown, type SuiteResults } from './suite-report.js';

const DEFAULT_RESULTS = fileURLToPath(new URL('../results/suite.json', import.meta.url));
const DEFAULT_CHART = fileURLToPath(new URL('../../docs/benchmarks-peers.svg', import.meta.url));

export const REPORT_USAGE = `usage: npm run bench -- report [FILE] [options]

Reads a results file of the suite (default bench/results/suite.json), writes its SVG chart and
prints its tables as Markdown, as docs/benchmarks.md shows them.

  --svg FILE        where the chart goes (default docs/benchmarks-peers.svg)
  --markdown FILE   write the tables there instead of printing them`;

export async function runReportCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      svg: { type: 'string', default: DEFAULT_CHART },
      markdown: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(REPORT_USAGE);
    return 0;
  }
  if (positionals.length > 2) throw new UsageError(`unexpected arguments: ${positionals.slice(2).join(' ')}`);
  const source = resolve(positionals[1] ?? DEFAULT_RESULTS);
  const results = JSON.parse(await readFile(source, 'utf8')) as SuiteResults;
  if (results.benchmark !== 'suite') throw new UsageError(`${source} holds the results of "${results.benchmark}", not of the suite`);
  await writeFile(resolve(values.svg), renderSuiteChart(results));
  const markdown = formatSuiteMarkdown(results);
  if (values.markdown === undefined) console.log(markdown);
  else await writeFile(resolve(values.markdown), `${markdown}\n`);
  console.error(`chart: ${resolve(values.svg)}`);
  return 0;
}
