export { NATS_URL, DATABASE_URL, uniqueName } from './names';
export { useTestNats, type TestNats } from './test-nats';
export { useTestSchema, type TestSchema } from './test-schema';
export { eventually } from './eventually';
export { toolgateRejection } from './rejection';
export { makeBusyboxImage } from './busybox-image';
export {
  startNatsServer,
  freePort,
  type NatsServerProcess,
  type NatsServerOptions,
} from './nats-server-process';
export { tcpProxy, type TcpProxy } from './tcp-proxy';
export { hostAddresses } from './host-addresses';
export { recordingListener, type RecordingListener } from './recording-listener';
export { callEvents, requestedEvent, type CallEventsSpec } from './call-events';
export { testKeys, testJournalKeys, signedHeaders, publishSigned } from './test-keys';
export { reForger, type ReForger } from './re-forger';
export {
  startNatsCluster,
  type ClusterNode,
  type NatsCluster,
  type NatsClusterOptions,
  type Placement,
} from './nats-cluster';
export { BROKER_SHAPES, startTestBroker, type BrokerShape, type TestBroker } from './broker-shape';
