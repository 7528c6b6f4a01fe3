import { Parser, DiagnosticSeverity } from '@asyncapi/parser';
import { describe, expect, it } from 'vitest';
import { runCliHere } from './run-cli.fixture.js';

const MODULE = 'src/asyncapi/asyncapi-broker.fixture.ts';

describe('tablequeue asyncapi', { timeout: 30_000 }, () => {
  it("prints the AsyncAPI document of the module's broker as JSON, without the URL's user or password", async () => {
    const result = await runCliHere(['asyncapi', '--module', MODULE, '--title', 'Orders', '--api-version', '3.2.0']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).not.toMatch(/fixture-user|fixture-secret/);
    const document = JSON.parse(result.stdout) as Record<string, unknown>;
    expect(document).toMatchObject({
      asyncapi: '3.0.0',
      info: { title: 'Orders', version: '3.2.0' },
      servers: { database: { host: 'db.internal:6432', pathname: '/orders', protocol: 'postgresql' } },
      operations: {
        receive_jobs_emails: { action: 'receive', channel: { $ref: '#/channels/jobs_emails' } },
        deadLetter_jobs_emails: { action: 'send', channel: { $ref: '#/channels/jobs_emails-failed' } },
      },
    });
    const parsed = await new Parser().parse(result.stdout);
    expect(parsed.diagnostics.filter((diagnostic) => diagnostic.severity === DiagnosticSeverity.Error)).toEqual([]);
  });

  it('finds the broker by --export, or as the only broker the module exports', async () => {
    const named = await runCliHere(['asyncapi', '--module', MODULE, '--export', 'broker']);
    expect(named.code).toBe(0);
    const found = await runCliHere(['asyncapi', '--module', MODULE]);
    expect(found.stdout).toBe(named.stdout);
  });

  it('refuses an export that is missing or not a broker, and a missing --module, as usage', async () => {
    const missing = await runCliHere(['asyncapi', '--module', MODULE, '--export', 'nothing']);
    expect(missing).toMatchObject({ code: 2, stdout: '' });
    expect(missing.stderr).toMatch(/has no such export; its exports are broker, emails, settings/);
    const notBroker = await runCliHere(['asyncapi', '--module', MODULE, '--export', 'settings']);
    expect(notBroker.code).toBe(2);
    expect(notBroker.stderr).toMatch(/is not a tablequeue Broker/);
    const noModule = await runCliHere(['asyncapi']);
    expect(noModule.code).toBe(2);
    expect(noModule.stderr).toMatch(/asyncapi needs --module PATH/);
  });

  it('is in the command list, and its help names every flag', async () => {
    expect((await runCliHere(['--help'])).stdout).toMatch(/asyncapi +print the AsyncAPI document/);
    const help = await runCliHere(['asyncapi', '--help']);
    expect(help.code).toBe(0);
    for (const flag of ['--module', '--export', '--title', '--api-version', '--description']) expect(help.stdout).toContain(flag);
  });
});
