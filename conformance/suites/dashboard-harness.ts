/**
 * What the dashboard's browser tests and screenshots need: Debian's Chromium driven by
 * playwright-core, and `tablequeue dashboard` in a process of its own, as a user runs it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

const CLI = fileURLToPath(new URL('../../src/cli/cli.ts', import.meta.url));

/** Headless in a container: no sandbox, no GPU, and nothing fetched from the network by Chromium itself. */
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export function chromiumPath(): string {
  return process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
}

export function isChromiumInstalled(): boolean {
  return existsSync(chromiumPath());
}

export interface BrowserSession {
  readonly page: Page;
  readonly context: BrowserContext;
  close(): Promise<void>;
}

/** A fresh profile each launch, removed on close, so no state carries between runs. */
export async function launchBrowser(viewport = { width: 1280, height: 900 }): Promise<BrowserSession> {
  const profile = await mkdtemp(join(tmpdir(), 'tablequeue-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: chromiumPath(),
      headless: true,
      args: CHROMIUM_ARGS,
      viewport,
    });
    const page = context.pages()[0] ?? (await context.newPage());
    return {
      page,
      context,
      close: async () => {
        await context.close();
        await rm(profile, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(profile, { recursive: true, force: true });
    throw error;
  }
}

export interface DashboardProcess {
  readonly url: string;
  /** Sends SIGTERM and resolves with the exit code. */
  stop(): Promise<number | null>;
  /** What the process wrote to stderr so far, for failure messages. */
  stderr(): string;
}

/** Starts `tablequeue dashboard … --port 0` and waits for the line that names its address. */
export function startDashboardProcess(args: readonly string[], timeoutMs = 30_000): Promise<DashboardProcess> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', CLI, 'dashboard', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the dashboard did not start within ${timeoutMs} ms: ${stderr}`));
    }, timeoutMs);
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const match = /dashboard at (http:\/\/\S+)/.exec(stdout);
      if (match === null) return;
      clearTimeout(timer);
      resolve({
        url: match[1]!,
        stop: () => {
          if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
          return exited;
        },
        stderr: () => stderr,
      });
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the dashboard exited with code ${String(code)} before it served: ${stderr}`));
    });
  });
}
