import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { describeWhenLive } from '../require-live.js';

export const NATS_URL_VARIABLE = 'NATS_URL';
export const AMQP_URL_VARIABLE = 'AMQP_URL';
export const natsUrl = process.env[NATS_URL_VARIABLE] ?? 'nats://127.0.0.1:4222';
export const amqpUrl = process.env[AMQP_URL_VARIABLE] ?? 'amqp://guest:guest@127.0.0.1:5672';
const REACH_TIMEOUT_MS = 2_000;

/** Host and port of a `nats://` or `amqp://` URL (NATS also takes a bare `host:port`). */
export function addressOf(url: string, defaultPort: number): { host: string; port: number } {
  const parsed = new URL(url.includes('://') ? url : `nats://${url}`);
  return { host: parsed.hostname, port: parsed.port === '' ? defaultPort : Number(parsed.port) };
}

/** `url` with its host and port replaced by the proxy's, keeping credentials and path. */
export function urlThrough(url: string, port: number): string {
  const parsed = new URL(url.includes('://') ? url : `nats://${url}`);
  parsed.hostname = '127.0.0.1';
  parsed.port = String(port);
  return parsed.toString().replace(/\/$/, '');
}

/** A name no other test (or run) uses: streams, subjects, exchanges and queues of one test. */
export function uniqueName(prefix: string): string {
  return `tq_${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export function isReachable(address: { host: string; port: number }): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(address.port, address.host);
    const done = (reachable: boolean): void => {
      socket.destroy();
      resolve(reachable);
    };
    socket.setTimeout(REACH_TIMEOUT_MS, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Registers `body` when the server answers; see `describeWhenLive` for one that does not. */
export async function describeWithServer(
  name: string,
  server: { readonly address: { host: string; port: number }; readonly variable: string },
  body: () => void,
): Promise<void> {
  const missing = (await isReachable(server.address))
    ? undefined
    : `nothing answers at ${server.address.host}:${server.address.port}; start the server or set ${server.variable} to one that answers`;
  describeWhenLive(name, missing, body);
}
