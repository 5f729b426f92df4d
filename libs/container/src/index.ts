export {
  containerLimits,
  DEFAULT_CONTAINER_LIMITS,
  operatorLimits,
  type ContainerBackend,
  type ContainerLimits,
  type ContainerRequest,
  type ContainerResult,
} from './container-backend';
export { ImageStore, type LocalImage } from './image-store';
export {
  INPUT_DIR,
  INPUT_FILE,
  ociConfig,
  WORK_DIR,
  type OciConfig,
  type RuncPlan,
} from './oci-config';
export { seccompProfile, type SeccompProfile } from './seccomp-profile';
export { RuncBackend, type RuncSettings } from './runc-backend';
export {
  jobManifest,
  jobName,
  JobLabel,
  MAX_JOB_INPUT_BYTES,
  type JobSettings,
} from './job-manifest';
export { KubernetesBackend, type KubernetesSettings } from './kubernetes-backend';
