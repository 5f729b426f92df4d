import { randomBytes } from 'node:crypto';
import type {
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  V1ContainerStatus,
  V1Job,
  V1Pod,
} from '@kubernetes/client-node' with { 'resolution-mode': 'import' };
import { ConfigError, ErrorCode, InvalidArgumentsError, ToolgateError } from '@toolgate/contracts';
import { CappedBuffer } from '@toolgate/sandbox';
import {
  containerLimits,
  operatorLimits,
  type ContainerBackend,
  type ContainerLimits,
  type ContainerRequest,
  type ContainerResult,
} from './container-backend';
import { jobManifest, jobName, MAX_JOB_INPUT_BYTES, type JobSettings } from './job-manifest';

/** The operator's configuration of the Kubernetes backend. */
export interface KubernetesSettings extends Partial<JobSettings> {
  /**
   * Where the cluster is: a kubeconfig file. Default: `KUBECONFIG`, `~/.kube/config`, or the
   * pod's own service account when the executor runs in the cluster.
   */
  kubeconfig?: string;
  /** The most any Job may have; a tool may lower a limit, never raise one. */
  limits?: Partial<ContainerLimits>;
  /** How often a running Job's status is read (it backs off up to 2 s). Default 250 ms. */
  pollMs?: number;
}

/** Waiting reasons of a container that will never start: the Job is over before it ran. */
const CANNOT_START = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

/** Terminated reasons of a container whose command never ran (not found, not executable). */
const NEVER_RAN = new Set(['StartError', 'ContainerCannotRun']);

const DEFAULTS: JobSettings = {
  namespace: 'toolgate-tools',
  ttlSecondsAfterFinished: 300,
  runAsUser: 65532,
};

/** The client library is ESM only; loaded once, when a Kubernetes backend is opened. */
type Client = typeof import('@kubernetes/client-node', { with: { 'resolution-mode': 'import' } });

/**
 * The Kubernetes container backend: one Job per call (see {@link jobManifest}), created with
 * strict field validation, followed until it completes, fails or passes its deadline, and read
 * back from its pod: the exit code and reason from the container's status (`OOMKilled` is the
 * memory limit), the result from the pod's log. On a deadline, a cancel or a container that
 * cannot start, the Job is deleted with its pod at once; a finished Job stays for
 * `ttlSecondsAfterFinished` (its log with it), then Kubernetes removes it.
 *
 * The pod's log is stdout and stderr together (the kubelet merges them): a tool meant for
 * Kubernetes writes its JSON result and nothing else, or writes the result to
 * `/dev/termination-log`, which wins over the log when it is not empty.
 */
export class KubernetesBackend implements ContainerBackend {
  readonly kind = 'kubernetes' as const;

  private constructor(
    private readonly batch: BatchV1Api,
    private readonly core: CoreV1Api,
    private readonly settings: JobSettings,
    /** The operator's maxima. */
    readonly limits: Readonly<ContainerLimits>,
    private readonly pollMs: number,
  ) {}

  /** Loads the cluster configuration; a missing or unreadable one is a ConfigError. */
  static async open(settings: KubernetesSettings = {}): Promise<KubernetesBackend> {
    const k8s: Client = await import('@kubernetes/client-node');
    const kc: KubeConfig = new k8s.KubeConfig();
    try {
      if (settings.kubeconfig) kc.loadFromFile(settings.kubeconfig);
      else kc.loadFromDefault();
    } catch (err) {
      throw new ConfigError(`the Kubernetes configuration cannot be loaded: ${message(err)}`);
    }
    if (!kc.getCurrentCluster()) {
      throw new ConfigError(
        'no Kubernetes cluster is configured: set KUBECONFIG, or run the executor in a pod',
      );
    }
    return new KubernetesBackend(
      kc.makeApiClient(k8s.BatchV1Api),
      kc.makeApiClient(k8s.CoreV1Api),
      {
        namespace: settings.namespace ?? DEFAULTS.namespace,
        ttlSecondsAfterFinished:
          settings.ttlSecondsAfterFinished ?? DEFAULTS.ttlSecondsAfterFinished,
        runAsUser: settings.runAsUser ?? DEFAULTS.runAsUser,
        ...(settings.serviceAccountName ? { serviceAccountName: settings.serviceAccountName } : {}),
      },
      operatorLimits(settings.limits),
      settings.pollMs ?? 250,
    );
  }

  /** Nothing to wait for: finished Jobs are Kubernetes' to remove (their TTL). */
  async idle(): Promise<void> {}

  /** The Job this backend would create for `request` (what {@link run} sends). */
  manifest(request: ContainerRequest, suffix = randomBytes(4).toString('hex')): V1Job {
    return jobManifest(
      jobName(request.labels.tool, request.labels.dispatchId, suffix),
      request,
      containerLimits(this.limits, request.limits),
      this.settings,
    );
  }

  async run(request: ContainerRequest): Promise<ContainerResult> {
    if (Buffer.byteLength(request.input) > MAX_JOB_INPUT_BYTES) {
      throw new InvalidArgumentsError(request.labels.tool, [
        {
          path: [],
          message: `is larger than a Kubernetes Job can carry (${MAX_JOB_INPUT_BYTES} bytes of JSON)`,
        },
      ]);
    }
    const job = this.manifest(request);
    const name = job.metadata!.name!;
    const { namespace } = this.settings;
    const empty = () => ({
      stdout: new CappedBuffer(request.maxOutputBytes),
      stderr: new CappedBuffer(request.maxOutputBytes),
    });
    if (request.signal?.aborted) {
      return {
        ending: 'cancelled',
        exitCode: null,
        signal: null,
        memoryExceeded: false,
        ...empty(),
      };
    }
    try {
      await this.batch.createNamespacedJob({ namespace, body: job, fieldValidation: 'Strict' });
    } catch (err) {
      throw apiError(err, `the Job for ${request.labels.tool} could not be created`);
    }
    let keep = false;
    try {
      const ending = await this.follow(name, request);
      if (ending.kind !== 'finished') {
        return {
          ending: ending.kind === 'timeout' ? 'timeout' : 'cancelled',
          exitCode: null,
          signal: null,
          memoryExceeded: false,
          ...empty(),
          ...(ending.kind === 'cannot-start' ? { ending: 'exited', startError: ending.why } : {}),
        };
      }
      keep = true;
      return await this.result(ending.pod, request);
    } finally {
      if (!keep) await this.delete(name);
    }
  }

  /** Reads the Job until it is over: finished (with its pod), past its deadline, or cancelled. */
  private async follow(
    name: string,
    request: ContainerRequest,
  ): Promise<
    | { kind: 'finished'; pod: V1Pod }
    | { kind: 'timeout' }
    | { kind: 'cancelled' }
    | { kind: 'cannot-start'; why: string }
  > {
    const { namespace } = this.settings;
    const deadline = Date.now() + request.timeoutMs;
    let wait = this.pollMs;
    for (;;) {
      if (request.signal?.aborted) return { kind: 'cancelled' };
      let job: V1Job;
      try {
        job = await this.batch.readNamespacedJobStatus({ name, namespace });
      } catch (err) {
        throw apiError(err, `the Job ${name} could not be read`);
      }
      const conditions = job.status?.conditions ?? [];
      const failed = conditions.find((c) => c.type === 'Failed' && c.status === 'True');
      if (failed?.reason === 'DeadlineExceeded') return { kind: 'timeout' };
      const over = failed || conditions.some((c) => c.type === 'Complete' && c.status === 'True');
      const pod = await this.pod(name);
      const status = pod?.status?.containerStatuses?.[0];
      const waiting = status?.state?.waiting;
      if (waiting?.reason && CANNOT_START.has(waiting.reason)) {
        return { kind: 'cannot-start', why: `${waiting.reason}: ${waiting.message ?? ''}`.trim() };
      }
      if (over && pod && status?.state?.terminated) return { kind: 'finished', pod };
      if (Date.now() >= deadline) return { kind: 'timeout' };
      await sleep(Math.min(wait, Math.max(0, deadline - Date.now())), request.signal);
      wait = Math.min(wait * 2, 2000);
    }
  }

  private async pod(job: string): Promise<V1Pod | undefined> {
    try {
      const pods = await this.core.listNamespacedPod({
        namespace: this.settings.namespace,
        labelSelector: `job-name=${job}`,
      });
      return pods.items[0];
    } catch (err) {
      throw apiError(err, `the pod of Job ${job} could not be read`);
    }
  }

  /** The ending of a finished pod: its container's exit, its termination message or log. */
  private async result(pod: V1Pod, request: ContainerRequest): Promise<ContainerResult> {
    const status = pod.status!.containerStatuses![0] as V1ContainerStatus;
    const terminated = status.state!.terminated!;
    const stdout = new CappedBuffer(request.maxOutputBytes);
    const stderr = new CappedBuffer(request.maxOutputBytes);
    if (terminated.reason && NEVER_RAN.has(terminated.reason)) {
      return {
        ending: 'exited',
        exitCode: terminated.exitCode,
        signal: null,
        memoryExceeded: false,
        startError: `${terminated.reason}: ${terminated.message ?? ''}`.trim(),
        stdout,
        stderr,
      };
    }
    if (terminated.message) {
      stdout.push(Buffer.from(terminated.message));
    } else {
      try {
        const log = await this.core.readNamespacedPodLog({
          name: pod.metadata!.name!,
          namespace: this.settings.namespace,
          container: 'tool',
          limitBytes: request.maxOutputBytes + 1,
        });
        // stdout and stderr arrive merged: the log is the result (or a declared error) as stdout,
        // and after a failing exit also the stderr whose tail the error carries.
        const bytes = Buffer.from(log);
        stdout.push(bytes);
        if (terminated.exitCode !== 0) stderr.push(bytes);
      } catch (err) {
        throw apiError(err, `the log of ${pod.metadata?.name} could not be read`);
      }
    }
    return {
      ending: 'exited',
      exitCode: terminated.exitCode,
      signal: null,
      memoryExceeded: terminated.reason === 'OOMKilled',
      stdout,
      stderr,
    };
  }

  /** Deletes a Job and its pod now; one already gone is fine. */
  private async delete(name: string): Promise<void> {
    await this.batch
      .deleteNamespacedJob({
        name,
        namespace: this.settings.namespace,
        propagationPolicy: 'Background',
        gracePeriodSeconds: 0,
      })
      .catch(() => undefined);
  }
}

/** An API failure as a typed error: refused requests are `config`, the rest `unavailable`. */
function apiError(err: unknown, what: string): ToolgateError {
  const code = (err as { code?: unknown }).code;
  const status = typeof code === 'number' ? code : undefined;
  const permanent = status !== undefined && status >= 400 && status < 500 && status !== 429;
  return new ToolgateError(
    permanent ? ErrorCode.Config : ErrorCode.Unavailable,
    `${what}: ${status ? `HTTP ${status}` : message(err)}`,
    { details: status ? { status } : {} },
  );
}

function message(err: unknown): string {
  return (err as { message?: string }).message ?? String(err);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}
