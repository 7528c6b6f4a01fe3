import { ServerVersionError } from '../errors.js';

export interface VersionNumber {
  readonly major: number;
  readonly minor: number;
  readonly patch: number;
}

export function formatVersion(version: VersionNumber): string {
  return `${version.major}.${version.minor}.${version.patch}`;
}

export function isOlderThan(version: VersionNumber, floor: VersionNumber): boolean {
  if (version.major !== floor.major) return version.major < floor.major;
  if (version.minor !== floor.minor) return version.minor < floor.minor;
  return version.patch < floor.patch;
}

/** `3.45.1` at the start of the text; anything after a non-digit, non-dot character is ignored. */
export function parseDottedVersion(text: string): VersionNumber | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)(?![\d.])/.exec(text.trim());
  if (match === null) return undefined;
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]) };
}

/** Throws when `version` is below `floor`; `product` names the server in the message. */
export function requireVersion(details: {
  product: string;
  found: string;
  version: VersionNumber;
  floor: VersionNumber;
  why: string;
}): void {
  if (!isOlderThan(details.version, details.floor)) return;
  const required = `${details.product} ${formatVersion(details.floor)}`;
  throw new ServerVersionError({
    found: details.found,
    required,
    message: `${details.product} ${formatVersion(details.version)} is older than ${required}, the first with ${details.why}; upgrade the server`,
  });
}

export function unreadableVersion(details: { product: string; found: string; required: string }): ServerVersionError {
  return new ServerVersionError({
    found: details.found,
    required: details.required,
    message: `could not read a ${details.product} version from ${JSON.stringify(details.found)}; tablequeue needs ${details.required} or later`,
  });
}
