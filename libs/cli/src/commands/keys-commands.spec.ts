import { SERVICE_IDENTITIES, ServiceKeys, type KeySet } from '@toolgate/contracts';
import { ExitCode } from '../run-cli';
import { runCaptured as run } from '../../test/run-captured';

describe('toolgate keys generate', () => {
  it('prints a key set every identity can load, fresh each time (--json)', async () => {
    const first = await run(['keys', 'generate', '--json']);
    expect(first.code).toBe(ExitCode.Ok);
    const set = JSON.parse(first.stdout) as KeySet;
    for (const id of SERVICE_IDENTITIES) expect(ServiceKeys.ofSet(id, set).identity).toBe(id);
    const second = JSON.parse((await run(['keys', 'generate', '--json'])).stdout) as KeySet;
    expect(second.privateKeys.gateway).not.toBe(set.privateKeys.gateway);
  });

  it('prints by default the Secrets and the ConfigMap deploy/k8s reads', async () => {
    const { code, stdout } = await run(['keys', 'generate']);
    expect(code).toBe(ExitCode.Ok);
    const docs = stdout.split('\n---\n');
    expect(docs).toHaveLength(SERVICE_IDENTITIES.length + 1);
    for (const id of SERVICE_IDENTITIES) {
      expect(stdout).toContain(`kind: Secret\nmetadata:\n  name: toolgate-signing-${id}\n`);
    }
    const map = /TOOLGATE_SIGNING_PUBLIC_KEYS: (.*)\n/.exec(stdout)![1]!;
    const publicKeys = JSON.parse(JSON.parse(map) as string) as Record<string, string>;
    const gatewayKey = /name: toolgate-signing-gateway\n[^]*?TOOLGATE_SIGNING_KEY: (.*)\n/.exec(
      stdout,
    )![1]!;
    expect(ServiceKeys.from('gateway', JSON.parse(gatewayKey) as string, publicKeys).identity).toBe(
      'gateway',
    );
  });
});
