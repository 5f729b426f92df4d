export { JsApiCode, isJsApiError, isTransitionTaken } from './nats-errors';
export {
  ensureJournalStreams,
  ensureConsumer,
  consumerName,
  type ConsumerSpec,
  type JournalStreamOptions,
} from './journal-infrastructure';
export { InboxRequests, NoRespondersError, RequestTimeoutError } from './inbox-requests';
export { JournalPublisher, type AppendResult, type StoredEvent } from './journal-publisher';
export {
  runJournalConsumer,
  type BatchEntry,
  type BatchHandling,
  type DeliveryContext,
  type JournalConsumerOptions,
  type PoisonReport,
  type ProcessedOutcome,
  type RunningConsumer,
} from './journal-consumer';
