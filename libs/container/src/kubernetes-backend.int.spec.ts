/**
 * The Kubernetes backend against real endpoints. Always: a cluster that does not answer (a closed
 * port on this machine) and configuration mistakes. Against a real API server only when
 * `KUBECONFIG` names one — those tests are registered only then (there is no API server on the
 * machines that run CI), see docs/executors.md.
 */
import { promises as fs } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ErrorCode } from '@toolgate/contracts';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { KubernetesBackend, type ContainerRequest } from './index';

const request = (extra: Partial<ContainerRequest> = {}): ContainerRequest => ({
  image: process.env.TOOLGATE_K8S_TEST_IMAGE ?? 'busybox:1.36',
  argv: ['/bin/sh', '-c', 'cat "$TOOLGATE_INPUT_FILE"'],
  env: { TOOLGATE_DISPATCH_ID: 'd-1' },
  cwd: os.tmpdir(),
  writable: true,
  protectedPaths: [],
  network: false,
  input: '{"name":"Ada"}',
  timeoutMs: 60_000,
  maxOutputBytes: 65536,
  labels: { tool: 'probe', dispatchId: `d-${Date.now()}` },
  ...extra,
});

describe('without a cluster', () => {
  let dir: string;
  let port: number;

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tg-kube-'));
    // A port nothing listens on: taken, then released.
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  afterAll(() => fs.rm(dir, { recursive: true, force: true }));

  const kubeconfig = async (server: string) => {
    const file = path.join(dir, `config-${Math.random().toString(36).slice(2)}`);
    await fs.writeFile(
      file,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server } }],
        users: [{ name: 'u', user: { token: 'not-a-real-token' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
    return file;
  };

  it('answers unavailable when the API server does not answer, and config for a bad kubeconfig', async () => {
    const backend = await KubernetesBackend.open({
      kubeconfig: await kubeconfig(`http://127.0.0.1:${port}`),
    });
    await expect(backend.run(request())).rejects.toMatchObject({ code: ErrorCode.Unavailable });
    await expect(
      KubernetesBackend.open({ kubeconfig: path.join(dir, 'missing') }),
    ).rejects.toMatchObject({ code: ErrorCode.Config });
  });

  it('refuses an input larger than a Job can carry before anything is sent', async () => {
    const backend = await KubernetesBackend.open({
      kubeconfig: await kubeconfig(`http://127.0.0.1:${port}`),
    });
    const input = JSON.stringify({ blob: 'x'.repeat(200 * 1024) });
    await expect(backend.run(request({ input }))).rejects.toMatchObject({
      code: ErrorCode.InvalidArguments,
    });
  });

  it('sends a Job the Kubernetes schemas accept, with the operator settings', async () => {
    const backend = await KubernetesBackend.open({
      kubeconfig: await kubeconfig(`http://127.0.0.1:${port}`),
      namespace: 'tools',
      ttlSecondsAfterFinished: 60,
      runAsUser: 1000,
      serviceAccountName: 'toolgate-tool',
      limits: { memoryBytes: 128 * 1024 * 1024, cpus: 2 },
    });
    const job = backend.manifest(request({ limits: { cpus: 4 } }));
    expect(() => new Job(job as never).validate()).not.toThrow();
    expect(job.metadata!.namespace).toBe('tools');
    expect(job.spec!.ttlSecondsAfterFinished).toBe(60);
    expect(job.spec!.template.spec).toMatchObject({
      serviceAccountName: 'toolgate-tool',
      automountServiceAccountToken: false,
      securityContext: { runAsUser: 1000 },
    });
    // A tool may lower a limit, never raise one.
    expect(job.spec!.template.spec!.containers[0]!.resources!.limits).toEqual({
      memory: String(128 * 1024 * 1024),
      cpu: '2000m',
    });
  });
});

// Registered only when a cluster is configured: without one these tests do not exist (they are
// not skipped — CI has no API server to run them against).
if (process.env.KUBECONFIG) {
  describe(`against the cluster of KUBECONFIG (${process.env.KUBECONFIG})`, () => {
    let backend: KubernetesBackend;
    beforeAll(async () => {
      backend = await KubernetesBackend.open({
        ...(process.env.TOOLGATE_K8S_TEST_NAMESPACE
          ? { namespace: process.env.TOOLGATE_K8S_TEST_NAMESPACE }
          : {}),
      });
    });

    it('runs a Job and reads its result back: input file in, log out, no token mounted', async () => {
      const result = await backend.run(
        request({
          argv: [
            '/bin/sh',
            '-c',
            'test -e /var/run/secrets/kubernetes.io/serviceaccount && exit 9; cat "$TOOLGATE_INPUT_FILE"',
          ],
        }),
      );
      expect(result).toMatchObject({ ending: 'exited', exitCode: 0, memoryExceeded: false });
      expect(JSON.parse(result.stdout.text())).toEqual({ name: 'Ada' });
    }, 180_000);

    it('reports a failing exit and kills the Job at its deadline', async () => {
      const failing = await backend.run(
        request({ argv: ['/bin/sh', '-c', 'echo no >&2; exit 3'] }),
      );
      expect(failing).toMatchObject({ ending: 'exited', exitCode: 3 });
      const slow = await backend.run(request({ argv: ['sleep', '600'], timeoutMs: 5000 }));
      expect(slow.ending).toBe('timeout');
    }, 180_000);
  });
}
