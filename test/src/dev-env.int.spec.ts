import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { freePort, NATS_URL } from '@toolgate/testing';

const script = path.resolve(__dirname, '..', '..', 'scripts', 'dev-env.sh');

function devEnv(natsUrl: string) {
  const run = spawnSync('bash', [script, 'start'], {
    env: { ...process.env, NATS_URL: natsUrl },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: run.status, stderr: run.stderr };
}

/** `npm run start:<service>`'s check of NATS_URL, which may list a cluster's nodes. */
describe('scripts/dev-env.sh start', () => {
  it('accepts any live node of several, in any position', async () => {
    const dead = `nats://127.0.0.1:${await freePort()}`;
    expect(devEnv(`${NATS_URL},${dead}`)).toEqual({ status: 0, stderr: '' });
    // The last one live was the only case that passed before; the first dead one is the attack.
    expect(devEnv(`${dead},${NATS_URL}`)).toEqual({ status: 0, stderr: '' });
  });

  it('refuses when no listed node answers, and starts none of its own for a list', async () => {
    const [a, b] = [await freePort(), await freePort()];
    const run = devEnv(`nats://127.0.0.1:${a},nats://127.0.0.1:${b}`);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/no NATS server in .* answers/);
  });
});
