/**
 * The resolve hook that `library-from-dist.mjs` registers. Registered after tsx, it runs first:
 * tsx resolves `../src/x.js` to `src/x.ts`, and this hook answers `dist/x.js` for it. A module
 * missing from dist/ fails to load, naming the path: build first (`npm run build`).
 */
import { URL } from 'node:url';

const SOURCE = new URL('../src/', import.meta.url).href;
const BUILD = new URL('../dist/', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (!resolved.url.startsWith(SOURCE) || !resolved.url.endsWith('.ts')) return resolved;
  return { ...resolved, url: `${BUILD}${resolved.url.slice(SOURCE.length, -'.ts'.length)}.js`, format: 'module' };
}
