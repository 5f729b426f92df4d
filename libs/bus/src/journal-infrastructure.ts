import {
  AckPolicy,
  DeliverPolicy,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { ConsumerRole, Subjects } from '@toolgate/contracts';
import { isJsApiError, JsApiCode } from './nats-errors';

export interface JournalStreamOptions {
  /** Stream replicas: 1 on a laptop, 3 in production. */
  replicas?: number;
  /** How long the broker remembers a `Nats-Msg-Id` to deduplicate retried publishes. */
  duplicateWindowMs?: number;
  /** Memory storage for throwaway benchmarks; file storage otherwise. */
  storage?: 'file' | 'memory';
}

/**
 * Creates (or brings up to date) the journal and dead-letter streams. Idempotent: every replica of
 * every service calls it at start-up.
 */
export async function ensureJournalStreams(
  jsm: JetStreamManager,
  subjects: Subjects,
  options: JournalStreamOptions = {},
): Promise<void> {
  const common = {
    retention: RetentionPolicy.Limits,
    storage: options.storage === 'memory' ? StorageType.Memory : StorageType.File,
    num_replicas: options.replicas ?? 1,
    allow_direct: true,
  } satisfies Partial<StreamConfig>;
  await upsertStream(jsm, {
    ...common,
    name: subjects.journal.stream,
    subjects: [subjects.journal.all],
    duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
  });
  await upsertStream(jsm, {
    ...common,
    name: subjects.deadLetter.stream,
    subjects: [subjects.deadLetter.all],
    duplicate_window: nanos(120_000),
  });
}

async function upsertStream(
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & { name: string },
): Promise<void> {
  try {
    await jsm.streams.add(config);
  } catch (err) {
    if (!isJsApiError(err, JsApiCode.StreamNameInUse)) throw err;
    const { name, storage: _storage, retention: _retention, ...mutable } = config;
    await jsm.streams.update(name, mutable);
  }
}

export interface ConsumerSpec {
  role: ConsumerRole;
  /** The event type this consumer filters on, or `'*'` for every journal event. */
  eventType: string;
  /** How long the broker waits for an ack before redelivering. */
  ackWaitMs?: number;
  /** Deliveries before a message is dead-lettered. */
  maxDeliver?: number;
  /** Unacked messages in flight across all replicas. */
  maxAckPending?: number;
}

/** The durable consumer name for a spec (one per role and filter: nats-server 2.9 filters on one subject). */
export function consumerName(
  subjects: Subjects,
  spec: Pick<ConsumerSpec, 'role' | 'eventType'>,
): string {
  return spec.eventType === '*'
    ? subjects.consumer(spec.role)
    : `${subjects.consumer(spec.role)}-${spec.eventType}`;
}

/**
 * Creates or updates a durable pull consumer with explicit acks. Idempotent. No broker-side
 * `backoff`: on nats-server it replaces `ack_wait` for every delivery, so a short failure backoff
 * would redeliver slow successes too. Failure backoff is the consumer loop's `nak(delay)`; crash
 * recovery is `ack_wait`.
 */
export async function ensureConsumer(
  jsm: JetStreamManager,
  subjects: Subjects,
  spec: ConsumerSpec,
): Promise<string> {
  const name = consumerName(subjects, spec);
  const maxDeliver = spec.maxDeliver ?? 5;
  const config = {
    durable_name: name,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject:
      spec.eventType === '*' ? subjects.journal.all : subjects.journal.ofType(spec.eventType),
    ack_wait: nanos(spec.ackWaitMs ?? 30_000),
    max_deliver: maxDeliver,
    max_ack_pending: spec.maxAckPending ?? 1000,
  };
  try {
    await jsm.consumers.info(subjects.journal.stream, name);
    const { durable_name: _d, deliver_policy: _p, ack_policy: _a, ...mutable } = config;
    await jsm.consumers.update(subjects.journal.stream, name, mutable);
  } catch (err) {
    if (!isJsApiError(err, JsApiCode.ConsumerNotFound)) throw err;
    try {
      await jsm.consumers.add(subjects.journal.stream, config);
    } catch (addErr) {
      // Another replica created it between our info and add: that is the idempotent outcome.
      if (!isJsApiError(addErr, JsApiCode.ConsumerNameExists)) throw addErr;
    }
  }
  return name;
}
