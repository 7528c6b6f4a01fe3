import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { HostAllowList } from './host-allow-list.js';

const PORT = 4300;

function listFor(boundHost: string, allowedHosts?: string[]): HostAllowList {
  return new HostAllowList({ boundHost, allowedHosts, optionName: '--allowed-host' });
}

describe('HostAllowList', () => {
  it('answers loopback names on any port, and never a name that DNS could point here', () => {
    const list = listFor('127.0.0.1');
    for (const host of ['localhost:4300', '127.0.0.1:4300', '[::1]:4300', 'LOCALHOST:8080', '127.0.0.1']) {
      expect(list.allowsHost(host, PORT)).toBe(true);
    }
    for (const host of ['rebind.attacker.example:4300', 'localhost.attacker.example:4300', 'localhost.:4300', '127.0.0.2:4300', '', undefined]) {
      expect(list.allowsHost(host, PORT)).toBe(false);
    }
  });

  it('answers the bound address on the bound port only', () => {
    const list = listFor('127.0.0.2');
    expect(list.allowsHost('127.0.0.2:4300', PORT)).toBe(true);
    expect(list.allowsHost('127.0.0.2:4301', PORT)).toBe(false);
    expect(list.allowsHost('rebind.attacker.example:4300', PORT)).toBe(false);
    expect(listFor('::1').allowsHost('[::1]:4300', PORT)).toBe(true);
    expect(listFor('fd00::5').allowsHost('[fd00::5]:4300', PORT)).toBe(true);
  });

  it('treats 0.0.0.0 and :: as no host name: only loopback names and allowed hosts pass', () => {
    for (const bound of ['0.0.0.0', '::']) {
      const list = listFor(bound, ['dash.example.com', '10.0.0.5:4300']);
      expect(list.allowsHost('0.0.0.0:4300', PORT)).toBe(false);
      expect(list.allowsHost('[::]:4300', PORT)).toBe(false);
      expect(list.allowsHost('192.168.1.5:4300', PORT)).toBe(false);
      expect(list.allowsHost('rebind.attacker.example:4300', PORT)).toBe(false);
      expect(list.allowsHost('localhost:4300', PORT)).toBe(true);
      expect(list.allowsHost('dash.example.com', PORT)).toBe(true);
      expect(list.allowsHost('Dash.Example.com:443', PORT)).toBe(true);
      expect(list.allowsHost('10.0.0.5:4300', PORT)).toBe(true);
      expect(list.allowsHost('10.0.0.5:4301', PORT)).toBe(false);
    }
  });

  it('checks an Origin against the list, not against the request’s own Host', () => {
    const list = listFor('127.0.0.2', ['dash.example.com']);
    expect(list.allowsOrigin('http://rebind.attacker.example:4300', PORT)).toBe(false);
    expect(list.allowsOrigin('http://127.0.0.2:4300', PORT)).toBe(true);
    expect(list.allowsOrigin('http://localhost:4300', PORT)).toBe(true);
    expect(list.allowsOrigin('https://dash.example.com', PORT)).toBe(true);
    for (const origin of ['null', 'file://', 'ftp://dash.example.com', 'http://dash.example.com/page', 'http://user@localhost:4300']) {
      expect(list.allowsOrigin(origin, PORT)).toBe(false);
    }
  });

  it('refuses an entry that is not a host and an optional port, naming the option', () => {
    for (const entry of ['http://dash.example.com', 'dash.example.com/x', 'user@dash.example.com', 'dash.example.com:', 'dash.example.com:99999', '*']) {
      expect(() => listFor('127.0.0.1', [entry])).toThrow(DeclarationError);
    }
    expect(() => listFor('127.0.0.1', ['a b'])).toThrow(/--allowed-host takes a host name or address/);
    expect(listFor('127.0.0.1', ['::1', '[fd00::5]:4300']).describe(PORT)).toBe('localhost, 127.0.0.1, [::1], [::1], [fd00::5]:4300');
    expect(listFor('127.0.0.2').describe(PORT)).toBe('localhost, 127.0.0.1, [::1], 127.0.0.2:4300');
  });
});
