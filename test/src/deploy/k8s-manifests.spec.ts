import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * Structural checks of the Kubernetes manifests in deploy/: what `kubectl apply --dry-run` cannot
 * judge without a cluster — probes on the right paths and ports, no secret values inline, and
 * every Service, HPA, PDB and NetworkPolicy pointing at a workload that exists.
 */

const root = path.join(__dirname, '..', '..', '..');
const dirs = ['deploy/k8s', 'deploy/nats'];

// Parsed manifests come in many shapes; the assertions below are the type checks.
type Obj = Record<string, any>;
interface Doc {
  file: string;
  obj: Obj;
}

const docs: Doc[] = [];
for (const dir of dirs) {
  for (const name of readdirSync(path.join(root, dir))) {
    if (!/\.ya?ml$/.test(name) || name === 'kustomization.yaml') continue;
    const file = `${dir}/${name}`;
    for (const doc of parseAllDocuments(readFileSync(path.join(root, file), 'utf8'))) {
      if (doc.errors.length)
        throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const obj = doc.toJS() as Obj | null;
      if (obj) docs.push({ file, obj });
    }
  }
}

const ofKind = (...kinds: string[]) => docs.filter((d) => kinds.includes(d.obj.kind));
const workloads = ofKind('Deployment', 'StatefulSet');
const services = ['gateway', 'permission-evaluator', 'tool-executor', 'journal', 'worktree'];
const ports: Record<string, number> = {
  gateway: 8080,
  'permission-evaluator': 8081,
  'tool-executor': 8082,
  journal: 8083,
  worktree: 8084,
};
const portVar: Record<string, string> = {
  gateway: 'GATEWAY_PORT',
  'permission-evaluator': 'EVALUATOR_PORT',
  'tool-executor': 'EXECUTOR_PORT',
  journal: 'JOURNAL_PORT',
  worktree: 'WORKTREE_PORT',
};

function podLabels(workload: Obj): Record<string, string> {
  return workload.spec.template.metadata.labels;
}

function matches(selector: Obj | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {}))
    if (labels[k] !== v) return false;
  for (const expr of (selector.matchExpressions ?? []) as Obj[]) {
    const has = expr.key in labels;
    if (expr.operator === 'In' && !(has && expr.values.includes(labels[expr.key]))) return false;
    if (expr.operator === 'NotIn' && has && expr.values.includes(labels[expr.key])) return false;
    if (expr.operator === 'Exists' && !has) return false;
    if (expr.operator === 'DoesNotExist' && has) return false;
  }
  return (
    Object.keys(selector.matchLabels ?? {}).length + (selector.matchExpressions ?? []).length > 0
  );
}

function containerPort(container: Obj, port: string | number): number | undefined {
  if (typeof port === 'number') return port;
  return (container.ports as Obj[] | undefined)?.find((p) => p.name === port)?.containerPort;
}

describe('Kubernetes manifests (deploy/k8s, deploy/nats)', () => {
  it('parses every document with apiVersion, kind, name and the toolgate namespace', () => {
    expect(docs.length).toBeGreaterThan(20);
    for (const { file, obj } of docs) {
      expect([file, typeof obj.apiVersion, typeof obj.kind, typeof obj.metadata?.name]).toEqual([
        file,
        'string',
        'string',
        'string',
      ]);
      if (obj.kind !== 'Namespace')
        expect([file, obj.metadata.name, obj.metadata.namespace]).toEqual([
          file,
          obj.metadata.name,
          'toolgate',
        ]);
    }
  });

  it('runs each of the five services from the one image with its own command and port', () => {
    for (const name of services) {
      const workload = workloads.find((w) => w.obj.metadata.name === name);
      expect([name, workload?.obj.kind]).toEqual([
        name,
        name === 'worktree' ? 'StatefulSet' : 'Deployment',
      ]);
      const [container, ...others] = workload!.obj.spec.template.spec.containers as Obj[];
      expect(others).toEqual([]);
      expect(container!.command).toEqual(['node', `services/${name}/dist/main.js`]);
      expect(containerPort(container!, 'http')).toBe(ports[name]);
      const env = container!.env as Obj[];
      expect([name, env.find((e) => e.name === portVar[name])?.value]).toEqual([
        name,
        String(ports[name]),
      ]);
    }
    const images = new Set(
      services.map(
        (n) =>
          workloads.find((w) => w.obj.metadata.name === n)!.obj.spec.template.spec.containers[0]
            .image,
      ),
    );
    expect(images.size).toBe(1);
  });

  it('gives every container resources, readiness on /readyz and liveness on /healthz at its own port', () => {
    for (const { file, obj } of workloads) {
      for (const c of obj.spec.template.spec.containers as Obj[]) {
        const where = `${file} ${c.name}`;
        for (const kind of ['requests', 'limits']) {
          expect([
            where,
            kind,
            typeof c.resources?.[kind]?.cpu,
            typeof c.resources?.[kind]?.memory,
          ]).toEqual([where, kind, 'string', 'string']);
        }
        const expectedPath = (p: string) =>
          obj.metadata.name === 'nats' ? '/healthz?js-enabled-only=true' : p;
        expect([where, c.readinessProbe?.httpGet?.path]).toEqual([where, expectedPath('/readyz')]);
        expect([where, c.livenessProbe?.httpGet?.path]).toEqual([where, expectedPath('/healthz')]);
        for (const probe of [c.readinessProbe, c.livenessProbe]) {
          expect([where, containerPort(c, probe.httpGet.port)]).toEqual([
            where,
            expect.any(Number),
          ]);
        }
      }
    }
  });

  it('drains gracefully: a preStop sleep before SIGTERM and a grace period longer than it', () => {
    for (const name of services) {
      const spec = workloads.find((w) => w.obj.metadata.name === name)!.obj.spec.template.spec;
      const sleep = spec.containers[0].lifecycle?.preStop?.exec?.command as string[];
      expect([name, sleep?.[0]]).toEqual([name, 'sleep']);
      expect(spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(Number(sleep[1]) + 30);
    }
    const executor = workloads.find((w) => w.obj.metadata.name === 'tool-executor')!.obj.spec
      .template.spec;
    // A tool may run for EXECUTOR_DEFAULT_TIMEOUT_MS before it settles; the grace period covers it.
    const timeoutMs = Number(
      (executor.containers[0].env as Obj[]).find((e) => e.name === 'EXECUTOR_DEFAULT_TIMEOUT_MS')!
        .value,
    );
    expect(executor.terminationGracePeriodSeconds * 1000).toBeGreaterThan(timeoutMs + 10_000);
  });

  it('keeps the worktree service on one replica with its state on a persistent volume', () => {
    const worktree = workloads.find((w) => w.obj.metadata.name === 'worktree')!.obj;
    expect(worktree.spec.replicas).toBe(1);
    const claim = (worktree.spec.volumeClaimTemplates as Obj[])[0]!;
    const mount = (worktree.spec.template.spec.containers[0].volumeMounts as Obj[]).find(
      (m) => m.name === claim.metadata.name,
    );
    const root = (worktree.spec.template.spec.containers[0].env as Obj[]).find(
      (e) => e.name === 'WORKTREE_ROOT',
    )!.value as string;
    expect(root.startsWith(`${mount!.mountPath}/`)).toBe(true);
    expect(
      ofKind('HorizontalPodAutoscaler').map((d) => d.obj.spec.scaleTargetRef.name),
    ).not.toContain('worktree');
  });

  it('never inlines a secret value: credentials come from secretKeyRef and there are no Secret objects', () => {
    expect(ofKind('Secret')).toEqual([]);
    const suspicious =
      /(password|passwd|secret|token|credential|database_url|api_?key|private_?key)/i;
    const walk = (value: unknown, trail: string[], file: string): void => {
      if (Array.isArray(value))
        return value.forEach((v, i) => walk(v, [...trail, String(i)], file));
      if (!value || typeof value !== 'object') return;
      const obj = value as Obj;
      // An env entry whose name looks secret must take its value from a Secret.
      if (
        typeof obj.name === 'string' &&
        suspicious.test(obj.name) &&
        ('value' in obj || 'valueFrom' in obj)
      ) {
        expect([file, obj.name, obj.value, obj.valueFrom?.secretKeyRef?.name]).toEqual([
          file,
          obj.name,
          undefined,
          expect.any(String),
        ]);
      }
      for (const [k, v] of Object.entries(obj)) {
        if (suspicious.test(k) && (typeof v === 'string' || typeof v === 'number')) {
          throw new Error(
            `${file}: ${[...trail, k].join('.')} holds a literal value under a secret-looking key`,
          );
        }
        walk(v, [...trail, k], file);
      }
    };
    for (const { file, obj } of docs) walk(obj, [], file);
    for (const { file, obj } of ofKind('ConfigMap')) {
      for (const [k, v] of Object.entries(obj.data ?? {})) {
        expect([file, k, /:\/\/[^/@\s]+:[^/@\s]+@/.test(String(v))]).toEqual([file, k, false]);
      }
    }
  });

  it('points every Service at pods that exist, on a port the pods declare', () => {
    for (const { file, obj } of ofKind('Service')) {
      const targets = workloads.filter((w) =>
        Object.entries(obj.spec.selector).every(([k, v]) => podLabels(w.obj)[k] === v),
      );
      expect([file, obj.metadata.name, targets.length]).toEqual([file, obj.metadata.name, 1]);
      const container = targets[0]!.obj.spec.template.spec.containers[0];
      for (const port of obj.spec.ports as Obj[]) {
        expect([file, port.name, containerPort(container, port.targetPort ?? port.port)]).toEqual([
          file,
          port.name,
          expect.any(Number),
        ]);
      }
    }
    for (const name of services) {
      expect(
        ofKind('Service').some((s) => s.obj.spec.selector['app.kubernetes.io/name'] === name),
      ).toBe(true);
    }
  });

  it('targets an existing workload with every HPA and PDB, and gives each stateless service both', () => {
    for (const { file, obj } of ofKind('HorizontalPodAutoscaler')) {
      const ref = obj.spec.scaleTargetRef;
      expect([
        file,
        workloads.some((w) => w.obj.kind === ref.kind && w.obj.metadata.name === ref.name),
      ]).toEqual([file, true]);
      expect(obj.spec.minReplicas).toBeLessThanOrEqual(obj.spec.maxReplicas);
    }
    for (const { file, obj } of ofKind('PodDisruptionBudget')) {
      expect([
        file,
        workloads.filter((w) => matches(obj.spec.selector, podLabels(w.obj))).length,
      ]).toEqual([file, 1]);
    }
    for (const name of services.filter((n) => n !== 'worktree')) {
      expect([
        name,
        ofKind('HorizontalPodAutoscaler').some((h) => h.obj.spec.scaleTargetRef.name === name),
      ]).toEqual([name, true]);
    }
    for (const w of workloads) {
      const name = w.obj.metadata.name;
      expect([
        name,
        ofKind('PodDisruptionBudget').some((p) => matches(p.obj.spec.selector, podLabels(w.obj))),
      ]).toEqual([name, true]);
    }
  });

  it('denies by default and gives every workload a NetworkPolicy of its own', () => {
    const policies = ofKind('NetworkPolicy').map((d) => d.obj);
    const deny = policies.find(
      (p) => Object.keys(p.spec.podSelector).length === 0 && !p.spec.ingress && !p.spec.egress,
    );
    expect(deny?.spec.policyTypes.sort()).toEqual(['Egress', 'Ingress']);
    for (const w of workloads) {
      const name = w.obj.metadata.name;
      expect([name, policies.some((p) => matches(p.spec.podSelector, podLabels(w.obj)))]).toEqual([
        name,
        true,
      ]);
    }
    const egressPorts = (name: string) =>
      policies
        .filter((p) =>
          matches(
            p.spec.podSelector,
            podLabels(workloads.find((w) => w.obj.metadata.name === name)!.obj),
          ),
        )
        .flatMap((p) => (p.spec.egress ?? []) as Obj[])
        .flatMap((rule) => (rule.ports ?? []).map((port: Obj) => port.port));
    // NATS for everyone; PostgreSQL for the journal only; the executor's web egress is explicit.
    for (const name of services)
      expect([name, egressPorts(name)]).toEqual([name, expect.arrayContaining([4222])]);
    for (const name of services)
      expect([name, egressPorts(name).includes(5432)]).toEqual([name, name === 'journal']);
    expect(egressPorts('tool-executor')).toEqual(expect.arrayContaining([80, 443]));
    for (const name of services.filter((n) => n !== 'tool-executor'))
      expect([name, egressPorts(name).includes(443)]).toEqual([name, false]);
    const ingressTo = (name: string) =>
      policies.filter(
        (p) =>
          matches(
            p.spec.podSelector,
            podLabels(workloads.find((w) => w.obj.metadata.name === name)!.obj),
          ) && (p.spec.ingress as Obj[] | undefined)?.some((r) => !r.from),
      );
    expect(ingressTo('gateway').length).toBe(1);
    for (const name of services.filter((n) => n !== 'gateway'))
      expect([name, ingressTo(name).length]).toEqual([name, 0]);
  });

  it('runs NATS as a three-node JetStream StatefulSet behind a headless Service', () => {
    const nats = workloads.find((w) => w.obj.metadata.name === 'nats')!.obj;
    expect(nats.kind).toBe('StatefulSet');
    expect(nats.spec.replicas).toBe(3);
    const headless = ofKind('Service').find(
      (s) => s.obj.metadata.name === nats.spec.serviceName,
    )!.obj;
    expect(headless.spec.clusterIP).toBe('None');
    const conf = readFileSync(path.join(root, 'deploy/nats/nats.conf'), 'utf8');
    const routes = [...conf.matchAll(/nats-route:\/\/([a-z0-9-]+)\.([a-z0-9-]+)\.toolgate\.svc/g)];
    expect(routes.map((m) => m[1])).toEqual(['nats-0', 'nats-1', 'nats-2']);
    for (const m of routes) expect(m[2]).toBe(nats.spec.serviceName);
    // Every password the config references is an environment variable the pod gets from a Secret.
    const env = new Map(
      (nats.spec.template.spec.containers[0].env as Obj[]).map((e) => [e.name, e]),
    );
    for (const [, variable] of conf.matchAll(/password:\s*\$([A-Z0-9_]+)/g)) {
      expect([variable, env.get(variable!)?.valueFrom?.secretKeyRef?.name]).toEqual([
        variable,
        'toolgate-nats-users',
      ]);
    }
  });
});
