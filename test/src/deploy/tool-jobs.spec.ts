import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_CONTAINER_LIMITS, jobManifest, jobName } from '@toolgate/container';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ResourceQuota } from 'kubernetes-models/v1/ResourceQuota';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { parse, parseAllDocuments } from 'yaml';

/**
 * The namespace of container tools (deploy/k8s/tool-jobs) and the executor's side of it: every
 * object valid by the Kubernetes API's schemas (the `kubernetes-models` validators, installed with
 * the package: nothing is fetched), the Role granting exactly the calls the Kubernetes backend
 * makes, bound to the service account the executor runs as, and the Jobs the backend would create
 * with the deployment's settings cut off from the network unless a call may use it.
 */

const root = path.join(__dirname, '..', '..', '..');
type Obj = Record<string, any>;

const load = (file: string): Obj[] =>
  parseAllDocuments(readFileSync(path.join(root, file), 'utf8'))
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);

const tools = load('deploy/k8s/tool-jobs/tool-jobs.yaml');
const executorDocs = load('deploy/k8s/tool-executor.yaml');
const one = (docs: Obj[], kind: string, name?: string) => {
  const found = docs.filter((d) => d.kind === kind && (!name || d.metadata.name === name));
  expect([kind, name, found.length]).toEqual([kind, name, 1]);
  return found[0]!;
};

const executor = one(executorDocs, 'Deployment', 'tool-executor');
const env = Object.fromEntries(
  (executor.spec.template.spec.containers[0].env as Obj[]).map((e) => [e.name, e.value]),
);

const models: Record<string, new (data: never) => { validate(): void }> = {
  Namespace,
  ServiceAccount,
  Role,
  RoleBinding,
  ResourceQuota,
  NetworkPolicy,
  Deployment,
  Job,
};

function schemaErrors(obj: Obj): string | undefined {
  const Model = models[obj.kind];
  if (!Model) return `no schema for ${obj.kind}`;
  try {
    new Model(obj as never).validate();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The subset of NetworkPolicy podSelector semantics the manifests use (matchLabels). */
const selects = (policy: Obj, labels: Record<string, string>) =>
  Object.entries(policy.spec.podSelector.matchLabels ?? {}).every(([k, v]) => labels[k] === v);

describe('the namespace of container tools (deploy/k8s/tool-jobs)', () => {
  it('is applied by its kustomization, and every object is valid by the Kubernetes schemas', () => {
    const kustomization = parse(
      readFileSync(path.join(root, 'deploy/k8s/tool-jobs/kustomization.yaml'), 'utf8'),
    ) as Obj;
    expect(kustomization.resources).toEqual(['tool-jobs.yaml']);
    // The other kustomization sets namespace: toolgate on everything it applies: not these.
    const main = parse(readFileSync(path.join(root, 'deploy/k8s/kustomization.yaml'), 'utf8'));
    expect((main as Obj).resources).not.toContain('tool-jobs/tool-jobs.yaml');
    for (const obj of [...tools, ...executorDocs.filter((d) => d.kind in models)]) {
      expect([obj.kind, obj.metadata.name, schemaErrors(obj)]).toEqual([
        obj.kind,
        obj.metadata.name,
        undefined,
      ]);
    }
    // The validator does catch a mistake.
    expect(schemaErrors({ ...one(tools, 'Role'), rules: [{ verbs: 'get' }] })).toMatch(/verbs/);
  });

  it('is where the executor creates its Jobs, under the restricted Pod Security Standard', () => {
    const ns = one(tools, 'Namespace');
    expect(env.EXECUTOR_CONTAINER).toBe('kubernetes');
    expect(env.EXECUTOR_K8S_NAMESPACE).toBe(ns.metadata.name);
    expect(ns.metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
    for (const obj of tools.filter((o) => o.kind !== 'Namespace'))
      expect([obj.kind, obj.metadata.namespace]).toEqual([obj.kind, ns.metadata.name]);
  });

  it('lets the executor do exactly what its Kubernetes backend does, and nothing else', () => {
    const role = one(tools, 'Role');
    const grants = (role.rules as Obj[])
      .flatMap((r) =>
        (r.apiGroups as string[]).flatMap((g) =>
          (r.resources as string[]).flatMap((res) =>
            (r.verbs as string[]).map((v) => `${g || 'core'}/${res}:${v}`),
          ),
        ),
      )
      .sort();
    expect(grants).toEqual([
      'batch/jobs/status:get',
      'batch/jobs:create',
      'batch/jobs:delete',
      'batch/jobs:get',
      'core/pods/log:get',
      'core/pods:list',
    ]);
    const binding = one(tools, 'RoleBinding');
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: role.metadata.name,
    });
    const account = one(
      executorDocs,
      'ServiceAccount',
      executor.spec.template.spec.serviceAccountName,
    );
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: account.metadata.name, namespace: 'toolgate' },
    ]);
    // No Role or ClusterRole anywhere else gives the executor's account more.
    const elsewhere = readdirSync(path.join(root, 'deploy/k8s'))
      .filter((f) => /\.ya?ml$/.test(f))
      .flatMap((f) => load(`deploy/k8s/${f}`))
      .filter((d) => /Role/.test(d.kind));
    expect(elsewhere).toEqual([]);
  });

  it('gives the tool pods an account without a token, and no Role names it', () => {
    const account = one(tools, 'ServiceAccount', env.EXECUTOR_K8S_SERVICE_ACCOUNT);
    expect(account.automountServiceAccountToken).toBe(false);
    for (const binding of tools.filter((o) => o.kind === 'RoleBinding'))
      expect((binding.subjects as Obj[]).map((s) => s.name)).not.toContain(account.metadata.name);
  });

  it("cuts the executor's Jobs off the network unless the call may use it", () => {
    const job = (network: boolean) =>
      jobManifest(
        jobName('lint', 'd-1', 'a1'),
        {
          image: 'ghcr.io/acme/lint:1',
          argv: ['lint'],
          env: {},
          cwd: '/workspace',
          writable: true,
          protectedPaths: [],
          network,
          input: '{}',
          timeoutMs: 60_000,
          maxOutputBytes: 65536,
          labels: { tool: 'lint', dispatchId: 'd-1' },
        },
        DEFAULT_CONTAINER_LIMITS,
        {
          namespace: env.EXECUTOR_K8S_NAMESPACE,
          ttlSecondsAfterFinished: 300,
          runAsUser: 65532,
          serviceAccountName: env.EXECUTOR_K8S_SERVICE_ACCOUNT,
        },
      );
    const policies = tools.filter((o) => o.kind === 'NetworkPolicy');
    const deny = policies.find((p) => Object.keys(p.spec.podSelector).length === 0)!;
    expect(deny.spec).toEqual({ podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    for (const network of [false, true]) {
      const manifest = job(network);
      expect(schemaErrors(manifest as Obj)).toBeUndefined();
      const labels = manifest.spec!.template.metadata!.labels!;
      const opening = policies.filter(
        (p) => p !== deny && selects(p, labels) && (p.spec.egress ?? p.spec.ingress),
      );
      expect([network, opening.map((p) => p.metadata.name)]).toEqual([
        network,
        network ? ['tools-with-network'] : [],
      ]);
    }
    // What the restricted Pod Security Standard asks of every pod in the namespace.
    const pod = job(false).spec!.template.spec!;
    expect(pod.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.containers[0]!.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    // The open egress never reaches the cluster or private networks.
    const open = policies.find((p) => p.metadata.name === 'tools-with-network')!;
    const cidrs = (open.spec.egress as Obj[]).flatMap((r) =>
      (r.to as Obj[]).flatMap((t) => (t.ipBlock ? [t.ipBlock] : [])),
    );
    expect(cidrs).toEqual([
      {
        cidr: '0.0.0.0/0',
        except: expect.arrayContaining([
          '10.0.0.0/8',
          '172.16.0.0/12',
          '192.168.0.0/16',
          '169.254.0.0/16',
        ]),
      },
    ]);
  });
});
