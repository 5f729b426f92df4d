import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  SERVICE_IDENTITIES,
  ServiceKeys,
  ToolRequestVerifier,
  signToolRequest,
  type KeySet,
} from '@toolgate/contracts';
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

describe('toolgate keys tool-request-public-key', () => {
  it("prints the key a worker verifies the executor's signed requests with", async () => {
    const set = JSON.parse((await run(['keys', 'generate', '--json'])).stdout) as KeySet;
    const dir = mkdtempSync(join(tmpdir(), 'tg-keys-'));
    try {
      const file = join(dir, 'keys.json');
      writeFileSync(file, JSON.stringify(set));
      const { code, stdout } = await run(['keys', 'tool-request-public-key', '--keys-file', file]);
      expect(code).toBe(ExitCode.Ok);
      const verifier = new ToolRequestVerifier(stdout.trim());
      const payload = new TextEncoder().encode('{}');
      const now = Date.now();
      const executor = ServiceKeys.ofSet('tool-executor', set).toolRequestKey;
      const headers = signToolRequest(executor, 's', payload, now);
      expect(verifier.check('s', (n) => headers[n], payload, now)).toBeUndefined();
      const gateway = ServiceKeys.ofSet('gateway', set).toolRequestKey;
      const other = signToolRequest(gateway, 's', payload, now);
      expect(verifier.check('s', (n) => other[n], payload, now)).toBe('bad-signature');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a keys file that is not JSON or not a keys file with a config error, never echoing it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tg-keys-'));
    try {
      for (const [name, text, says] of [
        ['broken.json', '{"privateKey": "secret-material', 'is not JSON'],
        [
          'other.json',
          '{"privateKey": 42, "note": "secret-material"}',
          'is not a keys file ({ privateKey | privateKeys, publicKeys })',
        ],
      ] as const) {
        const file = join(dir, name);
        writeFileSync(file, text);
        const { code, stderr } = await run([
          'keys',
          'tool-request-public-key',
          '--keys-file',
          file,
        ]);
        expect(code).toBe(ExitCode.Failed);
        expect(stderr).toBe(`config: --keys-file ${file} ${says}\n`);
        expect(stderr).not.toContain('secret-material');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
