export {
  JsApiCode,
  isJsApiError,
  isPermissionViolation,
  isPublishRefused,
  isTransitionTaken,
  messagingFailure,
} from './nats-errors';
export { requestReply, type RequestReplyOptions } from './request-reply';
export { headersOf, leanHeaders, LeanHeaders } from './lean-headers';
export { apiThroughElection, ELECTION_BUDGET_MS } from './election-retry';
export {
  ensureJournalStreams,
  ensureConsumer,
  whilePeersJoin,
  journalPartitionCountOf,
  consumerName,
  type ConsumerSpec,
  type JournalStreamOptions,
} from './journal-infrastructure';
export {
  InboxRequests,
  NoRespondersError,
  RequestClosedError,
  RequestNotSentError,
  RequestTimeoutError,
  assertSendable,
} from './inbox-requests';
export { connectionState, type ConnectionState } from './connection-state';
export {
  requestJournalRebuild,
  REBUILD_SILENCE_MS,
  type JournalRebuildProgress,
  type JournalRebuildRequestOptions,
} from './journal-rebuild-request';
export {
  DirectGets,
  DirectGetError,
  type DirectMessage,
  type DirectQuery,
  type ReadFrom,
} from './direct-get';
export { trustedEvent, type TrustedEvent } from './event-trust';
export { bindServiceKeys, serviceKeysOf } from './service-keys-binding';
export {
  JournalPublisher,
  SUPERSEDE_ATTEMPTS,
  type JournalPublisherOptions,
  type AppendOptions,
  type AppendResult,
  type StoredEvent,
  type SubjectHead,
} from './journal-publisher';
export {
  ErrorStreaks,
  isCapped,
  nextStreak,
  type Streak,
  type StreakOutcome,
} from './error-streak';
export {
  runJournalConsumer,
  type BatchEntry,
  type BatchHandling,
  type DeliveryContext,
  type JournalConsumerOptions,
  type PoisonReport,
  type ProcessedOutcome,
  type InFlightMessage,
  type RunningConsumer,
} from './journal-consumer';
export {
  readJournalCalls,
  type JournalCall,
  type JournalCallsFilter,
  type JournalCallsStats,
  type ReadJournalCallsOptions,
} from './journal-calls-reader';
