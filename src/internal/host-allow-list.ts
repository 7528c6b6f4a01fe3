/**
 * The host names an HTTP server of ours (the dashboard, the metrics endpoint) answers to.
 *
 * DNS rebinding: a page at `http://rebind.attacker.example:4300/` re-resolves its own name to
 * the address the server listens on, and the browser then lets that page read the answers,
 * since to the browser they come from the page's own origin. The browser still names the
 * attacker's host in `Host` (and in `Origin`), and no DNS answer changes that, so a server that
 * answers only names it knows cannot be reached this way, whatever address it listens on.
 */
import { DeclarationError } from '../errors.js';

/** Names that only this machine resolves, whatever the DNS says. */
const LOOPBACK_NAMES: readonly string[] = ['localhost', '127.0.0.1', '[::1]'];

/** Addresses that mean "every interface": a browser cannot be sent there by name, so they name no host. */
const WILDCARD_ADDRESSES: ReadonlySet<string> = new Set(['0.0.0.0', '[::]']);

/** What a `Host` header or an allowed-host entry may hold: a name or address and a port, nothing else. */
const HOST_TEXT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?$/;

interface HostEntry {
  /** Lower case, IP addresses in the form a browser sends: `127.0.0.1`, `[::1]`. */
  readonly name: string;
  /** `undefined`: any port. */
  readonly port: number | undefined;
}

export interface HostAllowListOptions {
  /** The address the server listens on: `127.0.0.1`, `::1`, `0.0.0.0`, a host name. */
  readonly boundHost: string;
  /** More names the server answers to, `name` (any port) or `name:port`; a proxy's name, say. */
  readonly allowedHosts?: readonly string[] | undefined;
  /** How the caller names the option in an error: `--allowed-host` or `allowedHosts`. */
  readonly optionName: string;
}

export class HostAllowList {
  readonly #entries: readonly HostEntry[];
  /** The bound address as a host name, when it is one (not 0.0.0.0 or ::); it is answered on the bound port only. */
  readonly #boundName: string | undefined;

  constructor(options: HostAllowListOptions) {
    this.#entries = [...LOOPBACK_NAMES.map((name) => ({ name, port: undefined })), ...parseAllowedHosts(options.allowedHosts, options.optionName)];
    const bound = parseHost(bracketedIpv6(options.boundHost));
    this.#boundName = bound === undefined || WILDCARD_ADDRESSES.has(bound.name) ? undefined : bound.name;
  }

  /**
   * Whether a request's `Host` names this server. `localPort` is the port the request came in
   * on. Loopback names and entries without a port pass on any port: an SSH tunnel or a proxy on
   * this machine forwards from a port of its own, and no DNS answer makes a browser send them.
   */
  allowsHost(hostHeader: string | undefined, localPort: number): boolean {
    const host = hostHeader === undefined ? undefined : parseHost(hostHeader);
    return host !== undefined && this.#allows(host.name, host.port ?? 80, localPort);
  }

  /** Whether an `Origin` is a page of this server: http or https on an allowed host. */
  allowsOrigin(origin: string, localPort: number): boolean {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
    if (origin !== url.origin) return false;
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    return this.#allows(url.hostname, port, localPort);
  }

  /** The allowed names, for a refusal's message: `localhost, 127.0.0.1, [::1], 127.0.0.2:4300`. */
  describe(localPort: number): string {
    const names = this.#entries.map((entry) => (entry.port === undefined ? entry.name : `${entry.name}:${entry.port}`));
    if (this.#boundName !== undefined && !LOOPBACK_NAMES.includes(this.#boundName)) names.push(`${this.#boundName}:${localPort}`);
    return names.join(', ');
  }

  #allows(name: string, port: number, localPort: number): boolean {
    if (name === this.#boundName && port === localPort) return true;
    return this.#entries.some((entry) => entry.name === name && (entry.port === undefined || entry.port === port));
  }
}

/** Checks allowed-host entries before anything is opened; a `DeclarationError` names the bad one. */
export function checkAllowedHosts(allowedHosts: readonly string[] | undefined, optionName: string): void {
  parseAllowedHosts(allowedHosts, optionName);
}

function parseAllowedHosts(allowedHosts: readonly string[] | undefined, optionName: string): HostEntry[] {
  if (allowedHosts === undefined) return [];
  if (!Array.isArray(allowedHosts)) {
    throw new DeclarationError(`${optionName} must be a list of host names, got ${String(allowedHosts)}`);
  }
  return (allowedHosts as readonly unknown[]).map((text) => {
    const entry = typeof text === 'string' ? parseHost(bracketedIpv6(text)) : undefined;
    if (entry === undefined) {
      throw new DeclarationError(
        `${optionName} takes a host name or address with an optional port (dashboard.example.com, 10.0.0.5:4300, [fd00::5]), got ${JSON.stringify(text)}`,
      );
    }
    return entry;
  });
}

/** `::1` as a host is written `[::1]`; an IPv6 address with a port must come bracketed already. */
function bracketedIpv6(text: string): string {
  return !text.startsWith('[') && text.split(':').length > 2 ? `[${text}]` : text;
}

/**
 * `name[:port]` in the form a browser sends it: lower case, IPv4 and IPv6 addresses written
 * the one way the URL standard writes them (`127.1` is `127.0.0.1`). Undefined when the text
 * is not a plain host and port (user info, a path, a zone id, an empty port).
 */
function parseHost(text: string): HostEntry | undefined {
  if (!HOST_TEXT.test(text)) return undefined;
  let url: URL;
  try {
    url = new URL(`http://${text}/`);
  } catch {
    return undefined;
  }
  const explicitPort = /:(\d+)$/.exec(text.startsWith('[') ? text.slice(text.indexOf(']')) : text)?.[1];
  const port = explicitPort === undefined ? undefined : Number(explicitPort);
  if (port !== undefined && port > 65_535) return undefined;
  return { name: url.hostname, port };
}
