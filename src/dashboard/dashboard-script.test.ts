import { Script } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { DASHBOARD_PAGE } from './dashboard-page.js';
import { DASHBOARD_SCRIPT } from './dashboard-script.js';
import { DASHBOARD_STYLE } from './dashboard-style.js';

describe('dashboard page assets', () => {
  it('is a script the browser can parse', () => {
    expect(() => new Script(DASHBOARD_SCRIPT, { filename: 'dashboard.js' })).not.toThrow();
  });

  it('never turns text into markup and never evaluates text', () => {
    for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function']) {
      expect(DASHBOARD_SCRIPT).not.toContain(sink);
    }
  });

  it('loads nothing from another origin', () => {
    for (const asset of [DASHBOARD_PAGE, DASHBOARD_STYLE, DASHBOARD_SCRIPT]) {
      expect(asset).not.toMatch(/(?:https?:)?\/\/(?!www\.w3\.org\/2000\/svg)[a-z0-9.-]+\.[a-z]{2,}/i);
      expect(asset).not.toMatch(/@import|url\(/);
    }
  });
});
