import { describe, expect, it } from 'vitest';
import { DASHBOARD_PAGE } from './dashboard-page.js';
import { loadDashboardScript } from './dashboard-script-loader.js';
import { DASHBOARD_STYLE } from './dashboard-style.js';

describe('dashboard page assets', () => {
  it('compiles the page script from its TypeScript source into one file that imports nothing', async () => {
    const script = await loadDashboardScript();
    // Types are gone and so are the type-only imports: the browser fetches no module besides this one.
    expect(script).toContain('function renderThroughput(body) {');
    expect(script).not.toMatch(/^\s*import\b|\bimport\s*\(/m);
    expect(await loadDashboardScript()).toBe(script);
  });

  it('never turns text into markup and never evaluates text', async () => {
    const script = await loadDashboardScript();
    for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function']) {
      expect(script).not.toContain(sink);
    }
  });

  it('loads nothing from another origin', async () => {
    for (const asset of [DASHBOARD_PAGE, DASHBOARD_STYLE, await loadDashboardScript()]) {
      expect(asset).not.toMatch(/(?:https?:)?\/\/(?!www\.w3\.org\/2000\/svg)[a-z0-9.-]+\.[a-z]{2,}/i);
      expect(asset).not.toMatch(/@import|url\(/);
    }
  });
});
