import { createHash } from 'node:crypto';
import type { V1Job } from '@kubernetes/client-node' with { 'resolution-mode': 'import' };
import type { ContainerLimits, ContainerRequest } from './container-backend';
import { INPUT_DIR, INPUT_FILE, WORK_DIR } from './oci-config';

/** Labels and annotations Toolgate puts on what it creates. */
export const JobLabel = {
  ManagedBy: 'app.kubernetes.io/managed-by',
  Tool: 'toolgate.dev/tool',
  /** `none` or `allowed`: what the namespace's NetworkPolicies select tool pods by. */
  Network: 'toolgate.dev/network',
  DispatchId: 'toolgate.dev/dispatch-id',
  /** The pod annotation holding the call's input, projected to /toolgate/input.json. */
  Input: 'toolgate.dev/input',
} as const;

/**
 * The most input a Job can carry: Kubernetes caps all annotations of an object at 256 KiB, and
 * the input travels as one (see {@link jobManifest}).
 */
export const MAX_JOB_INPUT_BYTES = 192 * 1024;

/** The operator's settings for the Jobs of one executor. */
export interface JobSettings {
  namespace: string;
  /** How long a finished Job (and its pod and log) stays before Kubernetes deletes it. */
  ttlSecondsAfterFinished: number;
  /** The non-root user and group tools run as. */
  runAsUser: number;
  /** A service account for the pods (its token is never mounted); default: the namespace's. */
  serviceAccountName?: string;
}

/**
 * The Job of one call. Pure: the name comes in (see {@link jobName}).
 *
 * - One pod, never retried (`backoffLimit: 0`, `restartPolicy: Never`): a retry is the executor's
 *   decision, made from the journal, not the cluster's.
 * - `activeDeadlineSeconds` is the call's deadline; `ttlSecondsAfterFinished` removes what a
 *   crashed executor could not.
 * - No service account token (`automountServiceAccountToken: false`), no service links, no host
 *   namespaces; non-root, no privilege escalation, every capability dropped, read-only root file
 *   system, the runtime's default seccomp profile.
 * - Memory and CPU limits (requests equal to them: the pod's quality of service is Guaranteed);
 *   /work and /tmp are size-limited emptyDirs (the call's directory on the executor's machine is
 *   not shared with the cluster); the input is a pod annotation projected read-only at
 *   /toolgate/input.json by the downward API — no ConfigMap or Secret to create and clean up.
 * - The label `toolgate.dev/network` is `none` unless the call may use the network: the
 *   NetworkPolicies of deploy/k8s/tool-jobs.yaml cut such pods off.
 */
export function jobManifest(
  name: string,
  request: ContainerRequest,
  limits: ContainerLimits,
  settings: JobSettings,
): V1Job {
  const labels = {
    [JobLabel.ManagedBy]: 'toolgate',
    [JobLabel.Tool]: labelValue(request.labels.tool),
    [JobLabel.Network]: request.network ? 'allowed' : 'none',
  };
  const memory = String(Math.floor(limits.memoryBytes));
  const cpu = `${Math.max(1, Math.round(limits.cpus * 1000))}m`;
  const env = Object.entries({ ...request.env, TOOLGATE_INPUT_FILE: INPUT_FILE }).map(
    ([k, value]) => ({ name: k, value }),
  );
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      namespace: settings.namespace,
      labels,
      annotations: { [JobLabel.DispatchId]: request.labels.dispatchId },
    },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: Math.max(1, Math.ceil(request.timeoutMs / 1000)),
      ttlSecondsAfterFinished: settings.ttlSecondsAfterFinished,
      template: {
        metadata: {
          labels,
          annotations: { [JobLabel.Input]: request.input },
        },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          ...(settings.serviceAccountName
            ? { serviceAccountName: settings.serviceAccountName }
            : {}),
          enableServiceLinks: false,
          hostNetwork: false,
          hostPID: false,
          hostIPC: false,
          terminationGracePeriodSeconds: 0,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: settings.runAsUser,
            runAsGroup: settings.runAsUser,
            fsGroup: settings.runAsUser,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'tool',
              image: request.image,
              command: [...request.argv],
              env,
              workingDir: WORK_DIR,
              resources: { limits: { memory, cpu }, requests: { memory, cpu } },
              securityContext: {
                allowPrivilegeEscalation: false,
                privileged: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [
                { name: 'work', mountPath: WORK_DIR, readOnly: !request.writable },
                { name: 'tmp', mountPath: '/tmp' },
                { name: 'input', mountPath: INPUT_DIR, readOnly: true },
              ],
              terminationMessagePolicy: 'File',
            },
          ],
          volumes: [
            { name: 'work', emptyDir: { sizeLimit: String(limits.tmpBytes) } },
            { name: 'tmp', emptyDir: { sizeLimit: String(limits.tmpBytes) } },
            {
              name: 'input',
              downwardAPI: {
                items: [
                  {
                    path: 'input.json',
                    fieldRef: { fieldPath: `metadata.annotations['${JobLabel.Input}']` },
                  },
                ],
              },
            },
          ],
        },
      },
    },
  };
}

/**
 * A Job name for one run of a call: `tg-<tool>-<dispatch digest>-<attempt suffix>`, a DNS label
 * (the Job controller puts it in a label, so at most 63 characters). The suffix differs per run:
 * a redelivered call gets a new Job, never the old one's result.
 */
export function jobName(tool: string, dispatchId: string, suffix: string): string {
  const slug =
    tool
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 24)
      .replace(/-+$/, '') || 'tool';
  const digest = createHash('sha256').update(dispatchId).digest('hex').slice(0, 10);
  return `tg-${slug}-${digest}-${suffix
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '')
    .slice(0, 8)}`;
}

/** A label value: at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric. */
function labelValue(value: string): string {
  const cleaned = value
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .slice(0, 63)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return cleaned || 'tool';
}
