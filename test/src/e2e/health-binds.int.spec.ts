import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { startTestStack, type TestStack } from '../support/test-stack';

/** Whether a TCP connection to `host:port` is accepted (true) or refused (the error's code). */
function tryConnect(host: string, port: number): Promise<true | string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.setTimeout(5000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve('timeout');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
  });
}

/**
 * The all-in-one started with `GATEWAY_HOST=127.0.0.1` (as `stackEnv` starts it, through
 * `loadAllInOneOptions`): every service's HTTP listener — the gateway's API and the others' health
 * and metrics — binds to loopback alone, so nothing of a laptop's copy is reachable from the network.
 */
describe('the all-in-one binds every port where the gateway binds', () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await startTestStack('binds');
  }, 60_000);
  afterAll(() => stack?.stop());

  it('listens on 127.0.0.1 only, for the gateway and for every health and metrics port', async () => {
    const { gateway, evaluator, executor, journal, worktree } = stack.all;
    const services = { gateway, evaluator, executor, journal, worktree };
    const bound = Object.fromEntries(
      Object.entries(services).map(([name, s]) => {
        const address = s.app.getHttpServer().address() as AddressInfo;
        return [name, { address: address.address, port: address.port }];
      }),
    );
    for (const { address } of Object.values(bound)) expect(address).toBe('127.0.0.1');

    // From the outside: this machine's other addresses refuse every port loopback accepts.
    const external = Object.values(networkInterfaces())
      .flat()
      .filter((a) => a !== undefined && !a.internal && a.family === 'IPv4')
      .map((a) => a!.address);
    expect(external.length).toBeGreaterThan(0);
    for (const { port } of Object.values(bound)) {
      expect(await tryConnect('127.0.0.1', port)).toBe(true);
      for (const host of external) expect(await tryConnect(host, port)).toBe('ECONNREFUSED');
    }
  });
});
