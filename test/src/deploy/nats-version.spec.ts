import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

const root = path.resolve(__dirname, '..', '..', '..');

/** The nats-server the tests start (and `scripts/dev-env.sh` runs): on PATH, or Debian's. */
function testedVersion(): string {
  const binary = existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server';
  const run = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  const version = /v?(\d+\.\d+\.\d+)/.exec(run.stdout ?? '')?.[1];
  if (!version) throw new Error(`nats-server --version said: ${run.stdout}${run.stderr}`);
  return version;
}

/** `nats:<version>-alpine` → `<version>`. */
const versionOf = (image: unknown) =>
  /^nats:(\d+\.\d+\.\d+)(?:-[a-z0-9]+)?$/.exec(String(image))?.[1];

/**
 * One NATS version: the one the tests run (every spec, the cluster's too) is the one the
 * Kubernetes manifests and compose deploy — a behaviour the specs rely on (2.9's consumer create,
 * its direct gets) cannot change under a deployment unseen.
 */
describe('the NATS version', () => {
  it('is the same in deploy/nats, docker-compose.yml and the tests', () => {
    const statefulSet = parseAllDocuments(
      readFileSync(path.join(root, 'deploy/nats/nats-statefulset.yaml'), 'utf8'),
    )
      .map((d) => d.toJS() as { kind?: string; spec?: any })
      .find((d) => d?.kind === 'StatefulSet');
    const k8s = (statefulSet?.spec.template.spec.containers as { name: string; image: string }[])
      .filter((c) => c.name === 'nats')
      .map((c) => versionOf(c.image));
    const compose = parseAllDocuments(
      readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'),
    )[0]!.toJS() as { services: { nats: { image: string } } };
    const tested = testedVersion();
    expect({ k8s, compose: versionOf(compose.services.nats.image) }).toEqual({
      k8s: [tested],
      compose: tested,
    });
  });
});
