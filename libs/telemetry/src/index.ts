export {
  natsHeaderGetter,
  natsHeaderSetter,
  injectTraceContext,
  extractTraceContext,
} from './nats-header-propagation';
export {
  Attr,
  inSpan,
  consumerSpan,
  producerSpan,
  resumedSpan,
  annotate,
  recordFailure,
} from './spans';
export { setupTelemetry, type Telemetry, type TelemetryOptions } from './telemetry-setup';
export { requestTraceId } from './request-trace';
