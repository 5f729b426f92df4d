import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { runCli } from '@toolgate/cli';
import { ServiceKeys, type ServiceIdentity } from '@toolgate/contracts';

/**
 * Structural checks of the Kubernetes manifests in deploy/: what `kubectl apply --dry-run` cannot
 * judge without a cluster — probes on the right paths and ports, no secret values inline, and
 * every Service, HPA, PDB and NetworkPolicy pointing at a workload that exists. They read the files
 * as written, which is what `kubectl apply -k deploy/k8s` applies: the kustomization there adds
 * resources and the namespace, no patches (checked against `kubectl kustomize` where it exists).
 */

const root = path.join(__dirname, '..', '..', '..');
const dirs = ['deploy/k8s', 'deploy/nats'];

// Parsed manifests come in many shapes; the assertions below are the type checks.
type Obj = Record<string, any>;
interface Doc {
  file: string;
  obj: Obj;
}

/** Every document of deploy/k8s and deploy/nats, parsed afresh. */
function loadDocs(): Doc[] {
  const loaded: Doc[] = [];
  for (const dir of dirs) {
    for (const name of readdirSync(path.join(root, dir))) {
      if (!/\.ya?ml$/.test(name) || name === 'kustomization.yaml') continue;
      const file = `${dir}/${name}`;
      for (const doc of parseAllDocuments(readFileSync(path.join(root, file), 'utf8'))) {
        if (doc.errors.length)
          throw new Error(`${file}: ${doc.errors.map((e) => e.message).join('; ')}`);
        const obj = doc.toJS() as Obj | null;
        if (obj) loaded.push({ file, obj });
      }
    }
  }
  return loaded;
}

const docs = loadDocs();
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

/** ConfigMaps and Secrets by name, each as its data (a Secret's `data` decoded, `stringData` on top). */
interface EnvSources {
  configMaps: Map<string, Record<string, string>>;
  secrets: Map<string, Record<string, string>>;
}

function envSources(objects: Obj[]): EnvSources {
  const sources: EnvSources = { configMaps: new Map(), secrets: new Map() };
  for (const o of objects) {
    if (o.kind === 'ConfigMap') sources.configMaps.set(o.metadata.name, o.data ?? {});
    if (o.kind === 'Secret') {
      const data = Object.fromEntries(
        Object.entries((o.data ?? {}) as Record<string, string>).map(([k, v]) => [
          k,
          Buffer.from(v, 'base64').toString('utf8'),
        ]),
      );
      sources.secrets.set(o.metadata.name, { ...data, ...o.stringData });
    }
  }
  return sources;
}

/** A variable of a container's environment and the object it came from (`Secret/<name>`, …). */
interface EnvVar {
  value: string | undefined;
  from: string;
}

/**
 * A container's environment as the kubelet builds it: `envFrom` in order (a later source wins over
 * an earlier one), then `env` (which wins over `envFrom`). A source `envFrom` names must exist.
 */
function resolveEnv(container: Obj, sources: EnvSources): Map<string, EnvVar> {
  const env = new Map<string, EnvVar>();
  for (const ref of (container.envFrom ?? []) as Obj[]) {
    const [kind, name, data] = ref.configMapRef
      ? ['ConfigMap', ref.configMapRef.name, sources.configMaps.get(ref.configMapRef.name)]
      : ['Secret', ref.secretRef.name, sources.secrets.get(ref.secretRef.name)];
    if (!data)
      throw new Error(`${container.name}: envFrom names ${kind} ${name}, which no one creates`);
    for (const [k, v] of Object.entries(data))
      env.set(`${ref.prefix ?? ''}${k}`, { value: v, from: `${kind}/${name}` });
  }
  for (const e of (container.env ?? []) as Obj[]) {
    const secret = e.valueFrom?.secretKeyRef;
    const configMap = e.valueFrom?.configMapKeyRef;
    if ('value' in e) env.set(e.name, { value: String(e.value), from: 'value' });
    else if (secret)
      env.set(e.name, {
        value: sources.secrets.get(secret.name)?.[secret.key],
        from: `Secret/${secret.name}`,
      });
    else if (configMap)
      env.set(e.name, {
        value: sources.configMaps.get(configMap.name)?.[configMap.key],
        from: `ConfigMap/${configMap.name}`,
      });
    else env.set(e.name, { value: undefined, from: 'field' });
  }
  return env;
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

  it("gives each service exactly its own signing key, as `toolgate keys generate` prints it, and every identity's public key", async () => {
    let printed = '';
    const code = await runCli(['keys', 'generate'], {
      env: {},
      stdout: { write: (t: string) => (printed += t) },
      stderr: { write: (t: string) => (printed += t) },
    });
    expect(code).toBe(0);
    const generated = parseAllDocuments(printed).map((d) => d.toJS() as Obj);
    const sources = envSources([...docs.map((d) => d.obj), ...generated]);
    for (const name of services) {
      const container = workloads.find((w) => w.obj.metadata.name === name)!.obj.spec.template.spec
        .containers[0] as Obj;
      const env = resolveEnv(container, sources);
      const key = env.get('TOOLGATE_SIGNING_KEY');
      const publicKeys = env.get('TOOLGATE_SIGNING_PUBLIC_KEYS');
      expect([name, key?.from, publicKeys?.from]).toEqual([
        name,
        `Secret/toolgate-signing-${name}`,
        'ConfigMap/toolgate-signing-public-keys',
      ]);
      // The private key is the one listed under this identity in the public key map (`from` throws
      // otherwise): what the service checks at start-up.
      const keys = ServiceKeys.from(
        name as ServiceIdentity,
        key!.value!,
        JSON.parse(publicKeys!.value!) as Record<string, string>,
      );
      expect(keys.identity).toBe(name);
      // No other identity's signing Secret reaches the container, by envFrom or by a key reference.
      const signingSecrets = [
        ...((container.envFrom ?? []) as Obj[]).map((r) => r.secretRef?.name as string | undefined),
        ...((container.env ?? []) as Obj[]).map(
          (e) => e.valueFrom?.secretKeyRef?.name as string | undefined,
        ),
      ].filter((n) => n?.startsWith('toolgate-signing-'));
      expect([name, signingSecrets]).toEqual([name, [`toolgate-signing-${name}`]]);
      expect([
        name,
        env.get('TOOLGATE_REQUIRE_SIGNING_KEYS')?.value,
        env.has('TOOLGATE_SIGNING_KEYS_FILE'),
      ]).toEqual([name, 'true', false]);
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
    // Each stateless service scales by exactly one autoscaler: an HPA, or KEDA's ScaledObject
    // (which makes an HPA of its own; two on one Deployment would fight).
    const scalers = [...ofKind('HorizontalPodAutoscaler'), ...ofKind('ScaledObject')];
    for (const name of services.filter((n) => n !== 'worktree')) {
      expect([name, scalers.filter((h) => h.obj.spec.scaleTargetRef.name === name).length]).toEqual(
        [name, 1],
      );
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
    expect([...(deny?.spec.policyTypes ?? [])].sort()).toEqual(['Egress', 'Ingress']);
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

  // Registered only where kubectl exists (its kustomize is the judge): the checks above read the
  // files as written, so a patch in deploy/k8s/kustomization.yaml would go unseen by them.
  if (spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0) {
    it('reads what `kubectl kustomize deploy/k8s` builds: every object unchanged', () => {
      const built = spawnSync('kubectl', ['kustomize', path.join(root, 'deploy/k8s')], {
        encoding: 'utf8',
      });
      expect(built.stderr).toBe('');
      expect(built.status).toBe(0);
      const objects = parseAllDocuments(built.stdout).map((d) => d.toJS() as Obj);
      for (const { file, obj } of loadDocs().filter((d) => d.file.startsWith('deploy/k8s/'))) {
        const same = objects.find(
          (o) => o.kind === obj.kind && o.metadata.name === obj.metadata.name,
        );
        expect([file, obj.kind, obj.metadata.name, isDeepStrictEqual(same, obj)]).toEqual([
          file,
          obj.kind,
          obj.metadata.name,
          true,
        ]);
      }
    });
  }

  it('scales the evaluator and the executor on their durable consumers’ lag as well as CPU', () => {
    const consumersOf: Record<string, string[]> = {
      'permission-evaluator': ['toolgate_evaluator-requested'],
      'tool-executor': ['toolgate_executor-decided', 'toolgate_executor-resolved'],
    };
    for (const [name, consumers] of Object.entries(consumersOf)) {
      const scaled = ofKind('ScaledObject').find((s) => s.obj.spec.scaleTargetRef.name === name)!;
      const triggers = scaled.obj.spec.triggers as Obj[];
      const lag = triggers.filter((t) => t.type === 'nats-jetstream');
      expect([name, lag.map((t) => (t.metadata as Obj).consumer).sort()]).toEqual([
        name,
        [...consumers].sort(),
      ]);
      for (const t of lag) expect((t.metadata as Obj).stream).toBe('toolgate_journal');
      expect([name, triggers.some((t) => t.type === 'cpu')]).toEqual([name, true]);
      expect(scaled.obj.spec.minReplicaCount).toBeGreaterThanOrEqual(2);
      // Max ack pending is the consumer's, across replicas: below maxReplicaCount × concurrency,
      // the replicas the scaler adds past it get no work.
      const env = Object.fromEntries(
        (
          workloads.find((w) => w.obj.metadata.name === name)!.obj.spec.template.spec.containers[0]
            .env as Obj[]
        ).map((e) => [e.name, e.value]),
      );
      const prefix = name === 'tool-executor' ? 'EXECUTOR' : 'EVALUATOR';
      expect([name, Number(env[`${prefix}_MAX_ACK_PENDING`])]).toEqual([
        name,
        scaled.obj.spec.maxReplicaCount * Number(env[`${prefix}_CONCURRENCY`]),
      ]);
    }
    // The gateway keeps its CPU HPA.
    expect(ofKind('HorizontalPodAutoscaler').map((h) => h.obj.spec.scaleTargetRef.name)).toContain(
      'gateway',
    );
  });

  it('spreads every service Deployment across nodes', () => {
    for (const w of workloads.filter((x) => x.obj.kind === 'Deployment')) {
      const spread = (w.obj.spec.template.spec.topologySpreadConstraints ?? []) as Obj[];
      const name = w.obj.metadata.name;
      expect([
        name,
        spread.some(
          (c) =>
            c.topologyKey === 'kubernetes.io/hostname' &&
            matches(c.labelSelector as Obj, podLabels(w.obj)),
        ),
      ]).toEqual([name, true]);
    }
  });
});
