export {
  JetStreamServer,
  type JetStreamServerOptions,
  type JetStreamHandlerOptions,
  type JetStreamEventContext,
} from './jetstream-server';
export { HealthController, Readiness, type ReadinessCheck } from './health';
export { BusModule, NATS_CONNECTION, SUBJECTS } from './bus.module';
export {
  bootstrapService,
  stopOnce,
  type ServiceBootstrapOptions,
  type RunningService,
} from './service-bootstrap';
export { settlePoisonedDispatch, settlePoisoned } from './poison-settlement';
export { runUntilSignalled } from './run-until-signalled';
export {
  Metrics,
  MetricsController,
  MetricName,
  metricsFor,
  type ApprovalsPendingSource,
} from './metrics';
export {
  NatsEnvShape,
  natsSettings,
  connectNats,
  commaList,
  type NatsSettings,
} from './nats-settings';
export { serveRequests, type RequestEndpoint, type ServedEndpoints } from './request-responder';
