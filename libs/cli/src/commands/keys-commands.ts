import type { Command } from 'commander';
import {
  ConfigError,
  SERVICE_IDENTITIES,
  ServiceIdentity,
  devKeySet,
  generateKeySet,
  parseKeysFile,
  spkiBase64,
  toolRequestKeyOf,
  type KeySet,
} from '@toolgate/contracts';
import type { CommandContext } from '../run-cli';

/** The namespace of the manifests in deploy/k8s. */
const NAMESPACE = 'toolgate';

/**
 * `toolgate keys generate [--json]`: a fresh set of signing keys, one X25519 pair per internal
 * identity. By default as the Kubernetes objects deploy/k8s reads — a Secret per service
 * (`toolgate-signing-<identity>`, key `TOOLGATE_SIGNING_KEY`; `ops` is the operators') and one
 * ConfigMap of every public key (`toolgate-signing-public-keys`, key `TOOLGATE_SIGNING_PUBLIC_KEYS`);
 * with `--json` as a keys file (`{ privateKeys, publicKeys }`, `TOOLGATE_SIGNING_KEYS_FILE`).
 * Offline; the keys go to stdout only.
 */
export function registerKeysCommands(program: Command, ctx: CommandContext): void {
  const keys = program.command('keys').description('signing keys of the internal services');
  keys
    .command('generate')
    .description(
      'print a fresh key set: a Kubernetes Secret per service and a ConfigMap of public keys (or --json)',
    )
    .option('--json', 'print one JSON keys file: { privateKeys, publicKeys }')
    .action((opts: { json?: boolean }) => {
      const set = generateKeySet();
      ctx.out(opts.json ? `${JSON.stringify(set, null, 2)}\n` : kubernetesManifests(set));
    });
  keys
    .command('tool-request-public-key')
    .description(
      "print the public key workers verify remote tool requests with (the executor's, derived from its signing key)",
    )
    .option(
      '--keys-file <file>',
      "a keys file holding the tool-executor's private key (default: the development keyring)",
    )
    .action(async (opts: { keysFile?: string }) => {
      let privateKey: string | undefined;
      if (opts.keysFile) {
        const file = parseKeysFile(
          await ctx.readFile(opts.keysFile),
          `--keys-file ${opts.keysFile}`,
        );
        privateKey = file.privateKeys?.[ServiceIdentity.Executor] ?? file.privateKey;
      } else privateKey = devKeySet(process.env).privateKeys[ServiceIdentity.Executor];
      if (!privateKey) throw new ConfigError('the keys file holds no tool-executor private key');
      ctx.out(`${spkiBase64(toolRequestKeyOf(privateKey))}\n`);
    });
}

/** The Secrets and the ConfigMap of a key set, as one multi-document YAML. */
function kubernetesManifests(set: KeySet): string {
  const docs = SERVICE_IDENTITIES.map(
    (id) => `apiVersion: v1
kind: Secret
metadata:
  name: toolgate-signing-${id}
  namespace: ${NAMESPACE}
type: Opaque
stringData:
  TOOLGATE_SIGNING_KEY: ${JSON.stringify(set.privateKeys[id])}
`,
  );
  docs.push(`apiVersion: v1
kind: ConfigMap
metadata:
  name: toolgate-signing-public-keys
  namespace: ${NAMESPACE}
data:
  TOOLGATE_SIGNING_PUBLIC_KEYS: ${JSON.stringify(JSON.stringify(set.publicKeys))}
`);
  return `# toolgate keys generate: apply once per environment (kubectl apply -f -); rotating = a new set and a restart\n${docs.join('---\n')}`;
}
