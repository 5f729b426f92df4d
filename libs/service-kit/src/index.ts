export { type JetStreamHandlerOptions, type JetStreamEventContext } from './jetstream-server';
export { Readiness, type ReadinessCheck } from './health';
export { BusModule, NATS_CONNECTION, SUBJECTS } from './bus.module';
export {
  bootstrapService,
  stopOnce,
  natsServersForLog,
  type ServiceBootstrapOptions,
  type RunningService,
  type SideConnection,
} from './service-bootstrap';
export { settlePoisoned } from './poison-settlement';
export { runUntilSignalled } from './run-until-signalled';
export {
  describeInFlight,
  drainWithin,
  loadDrainSettings,
  type Drainable,
  type DrainSettings,
} from './drain';
export {
  startWithRetry,
  startupRetryDelayMs,
  DEFAULT_STARTUP_BACKOFF,
  type StartupBackoff,
  type StartupRetryOptions,
} from './startup-retry';
export {
  classifyStartupFailure,
  describeFailure,
  startupStep,
  StartupStepError,
  type StartupFailureKind,
} from './startup-failure';
export { OpenedResources, startClean } from './opened-resources';
export { Metrics, MetricName, SECONDS_BUCKETS, metricsFor, type ConsumerLag } from './metrics';
export {
  MetricsEnvShape,
  metricsSettings,
  BoundedLabel,
  Children,
  OTHER,
  DEFAULT_METRICS_SETTINGS,
  type MetricsSettings,
  type LabelSet,
} from './metric-labels';
export {
  NatsEnvShape,
  natsSettings,
  connectNats,
  commaList,
  type NatsSettings,
} from './nats-settings';
export {
  serveRequests,
  checkSignedRequest,
  type RequestEndpoint,
  type ServedEndpoints,
  type ServeRequestsOptions,
} from './request-responder';
export {
  assertInstallationOutsideToolScope,
  assertStateOutsideToolScope,
  assertStdioScopesApart,
  installationPaths,
  defaultStateDir,
  realLenient,
  signingStatePaths,
  type StatePath,
} from './tool-scope-guard';
