import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { serveMetrics } from './metrics-endpoint.js';

/** node:http rather than fetch, which would not send a Host or Origin header of the test's choosing. */
function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const outgoing = request(url, { headers }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}

const METRICS = '# TYPE tablequeue_claims_total counter\n';

describe('serveMetrics', () => {
  it('answers only hosts on its list, so a page elsewhere cannot read it by DNS rebinding', async () => {
    const endpoint = await serveMetrics({ port: 0, host: '127.0.0.2', allowedHosts: ['metrics.internal'] }, () => METRICS);
    try {
      const attacker = `rebind.attacker.example:${endpoint.port}`;
      const rebound = await get(endpoint.url, { host: attacker, origin: `http://${attacker}` });
      expect(rebound.status).toBe(421);
      expect(rebound.body).not.toContain('tablequeue_');
      expect(rebound.body).toMatch(/localhost, 127\.0\.0\.1, \[::1\], metrics\.internal, 127\.0\.0\.2:\d+; add the name your scraper uses/);

      const [ownAddress, loopbackName, allowed] = await Promise.all([
        get(endpoint.url),
        get(endpoint.url, { host: `localhost:${endpoint.port}` }),
        get(endpoint.url, { host: `metrics.internal:${endpoint.port}` }),
      ]);
      for (const answer of [ownAddress, loopbackName, allowed]) {
        expect(answer.status).toBe(200);
        expect(answer.body).toBe(METRICS);
      }
    } finally {
      await endpoint.close();
    }
  });

  it('refuses an allowed host that is not a host name with an optional port', async () => {
    await expect(serveMetrics({ port: 0, allowedHosts: ['metrics.internal/metrics'] }, () => METRICS)).rejects.toThrow(DeclarationError);
  });
});
