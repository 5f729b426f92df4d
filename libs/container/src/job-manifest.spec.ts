/**
 * The Job of a call, checked against the Kubernetes API's own schemas (the OpenAPI definitions of
 * Kubernetes 1.30+, compiled to JSON Schema validators by the `kubernetes-models` package and
 * installed with it: nothing is fetched) and for what the schema cannot say: the isolation it asks
 * for. The OpenAPI definitions allow unknown fields, so a misspelt one is caught elsewhere: by the
 * compiler (the manifest is a typed `V1Job` literal) and by the API server, which the backend asks
 * for strict field validation.
 */
import { Job } from 'kubernetes-models/batch/v1/Job';
import { DEFAULT_CONTAINER_LIMITS, type ContainerRequest } from './container-backend';
import { jobManifest, jobName, type JobSettings } from './job-manifest';

const settings: JobSettings = {
  namespace: 'toolgate-tools',
  ttlSecondsAfterFinished: 300,
  runAsUser: 65532,
};

const request = (extra: Partial<ContainerRequest> = {}): ContainerRequest => ({
  image: 'ghcr.io/acme/lint:1.2',
  argv: ['/usr/bin/lint', '--json', 'src/a b.ts'],
  env: { TOOLGATE_DISPATCH_ID: 'd-1', LANG: 'C.UTF-8' },
  cwd: '/srv/work',
  writable: true,
  protectedPaths: [],
  network: false,
  input: '{"path":"src/a b.ts"}',
  timeoutMs: 2500,
  maxOutputBytes: 65536,
  labels: { tool: 'Lint_Files', dispatchId: 'd-1' },
  ...extra,
});

const manifest = (extra: Partial<ContainerRequest> = {}) =>
  jobManifest(
    jobName('Lint_Files', 'd-1', 'a1b2c3'),
    request(extra),
    { ...DEFAULT_CONTAINER_LIMITS, memoryBytes: 256 * 1024 * 1024, cpus: 0.5 },
    settings,
  );

/** The schema validator's verdict: undefined when valid, else its message. */
function schemaErrors(object: unknown): string | undefined {
  try {
    new Job(object as never).validate();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

describe('jobManifest', () => {
  it('is a valid batch/v1 Job by the Kubernetes schemas — and the validator does catch mistakes', () => {
    expect(schemaErrors(manifest())).toBeUndefined();
    expect(schemaErrors(manifest({ network: true, writable: false }))).toBeUndefined();
    const broken = manifest() as { spec: { backoffLimit: unknown; template: unknown } };
    expect(schemaErrors({ ...broken, spec: { ...broken.spec, backoffLimit: '0' } })).toMatch(
      /backoffLimit must be integer/,
    );
    const noImage = manifest();
    delete (noImage.spec!.template.spec!.containers[0] as { name?: string }).name;
    expect(schemaErrors(noImage)).toMatch(/must have required property name/);
  });

  it('runs once, within the deadline, and is cleaned up after its TTL', () => {
    const { spec } = manifest();
    expect(spec).toMatchObject({
      backoffLimit: 0,
      activeDeadlineSeconds: 3,
      ttlSecondsAfterFinished: 300,
      template: { spec: { restartPolicy: 'Never' } },
    });
  });

  it('gives the pod no token, no host namespaces, no root, no capabilities, a read-only root', () => {
    const pod = manifest().spec!.template.spec!;
    expect(pod).toMatchObject({
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 65532,
        seccompProfile: { type: 'RuntimeDefault' },
      },
    });
    expect(pod.containers[0]!.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      privileged: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
  });

  it('limits memory and CPU, and carries the command, env and input', () => {
    const job = manifest();
    const container = job.spec!.template.spec!.containers[0]!;
    expect(container.resources).toEqual({
      limits: { memory: String(256 * 1024 * 1024), cpu: '500m' },
      requests: { memory: String(256 * 1024 * 1024), cpu: '500m' },
    });
    expect(container.command).toEqual(['/usr/bin/lint', '--json', 'src/a b.ts']);
    expect(container.args).toBeUndefined();
    expect(container.env).toEqual([
      { name: 'TOOLGATE_DISPATCH_ID', value: 'd-1' },
      { name: 'LANG', value: 'C.UTF-8' },
      { name: 'TOOLGATE_INPUT_FILE', value: '/toolgate/input.json' },
    ]);
    expect(job.spec!.template.metadata!.annotations).toEqual({
      'toolgate.dev/input': '{"path":"src/a b.ts"}',
    });
    const input = job.spec!.template.spec!.volumes!.find((v) => v.name === 'input');
    expect(input!.downwardAPI!.items![0]!.fieldRef!.fieldPath).toBe(
      "metadata.annotations['toolgate.dev/input']",
    );
  });

  it('labels the pod for the network policies: none unless the call may use the network', () => {
    const labels = (network: boolean) => manifest({ network }).spec!.template.metadata!.labels;
    expect(labels(false)).toMatchObject({ 'toolgate.dev/network': 'none' });
    expect(labels(true)).toMatchObject({ 'toolgate.dev/network': 'allowed' });
    expect(labels(false)).toMatchObject({ 'toolgate.dev/tool': 'Lint_Files' });
  });

  it('names each run of a call with a DNS label of at most 63 characters', () => {
    const name = jobName('A_very_long_tool_name_that_goes_on_and_on_and_on'.repeat(2), 'd', 'Zz9');
    expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(name.length).toBeLessThanOrEqual(63);
    expect(jobName('t', 'd-1', 'aaaa')).not.toBe(jobName('t', 'd-1', 'bbbb'));
    expect(jobName('t', 'd-1', 'aaaa')).not.toBe(jobName('t', 'd-2', 'aaaa'));
  });
});
