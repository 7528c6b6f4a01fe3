import { DeclarationError } from '../errors.js';

/**
 * Loads an optional peer dependency when a driver opens a pool from a URL. The client packages
 * are CommonJS or dual modules, so their API is either the default export or the namespace.
 */
export async function loadClientLibrary<T>(packageName: string, load: () => Promise<unknown>): Promise<T> {
  let namespace: unknown;
  try {
    namespace = await load();
  } catch (error) {
    const isMissing = (error as { code?: unknown } | undefined)?.code === 'ERR_MODULE_NOT_FOUND';
    const reason = isMissing
      ? `it is not installed: npm install ${packageName}`
      : `it failed to load (${error instanceof Error ? error.message : String(error)})`;
    throw new DeclarationError(`the database URL needs the "${packageName}" package, but ${reason}`, {
      cause: error,
    });
  }
  const { default: defaultExport } = namespace as { default?: unknown };
  return (defaultExport ?? namespace) as T;
}
