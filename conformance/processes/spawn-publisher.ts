import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const PUBLISHER = fileURLToPath(new URL('./queue-publisher.ts', import.meta.url));

export interface PublisherConfig {
  readonly database: string;
  readonly table: object;
  readonly queue: string;
  readonly payloads: readonly unknown[];
}

export interface PublishedRow {
  readonly id: string;
  /** When the publish returned in the other process (`Date.now()`, one clock on one machine). */
  readonly at: number;
}

/** Publishes from a separate Node process (TypeScript through tsx); resolves with the rows it wrote. */
export function publishFromAnotherProcess(config: PublisherConfig): Promise<PublishedRow[]> {
  const child = spawn(process.execPath, ['--import', 'tsx', PUBLISHER, JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`the publisher exited with code ${code}: ${stderr}`));
      else resolve(stdout.split('\n').filter((line) => line.startsWith('published ')).map(parsePublished));
    });
  });
}

function parsePublished(line: string): PublishedRow {
  const [, id, at] = line.split(' ');
  return { id: id!, at: Number(at) };
}
