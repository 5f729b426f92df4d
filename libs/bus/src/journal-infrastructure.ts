import {
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type StreamConfig,
} from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import {
  ConfigError,
  ErrorCode,
  ToolgateError,
  type ConsumerRole,
  type Subjects,
} from '@toolgate/contracts';
import { isJsApiError, isPermissionViolation, JsApiCode } from './nats-errors';

export interface JournalStreamOptions {
  /** Stream replicas: 1 on a laptop, 3 in production. */
  replicas?: number;
  /** How long the broker remembers a `Nats-Msg-Id` to deduplicate retried publishes. */
  duplicateWindowMs?: number;
  /**
   * Retention of the journal (and dead-letter) stream: messages older than this are dropped
   * (unset: kept by age forever). Keep it above the longest approval window (an open approval's
   * `suspended` is read from the stream) and the duplicate window.
   */
  maxAgeMs?: number;
  /** Retention by size, per replica: past it the oldest messages are dropped (unset: unbounded). */
  maxBytes?: number;
  /** Memory storage for throwaway benchmarks; file storage otherwise. */
  storage?: 'file' | 'memory';
  /**
   * Whether this caller owns the streams: it brings an existing stream's settings (replicas,
   * duplicate window) up to date. Only the journal service does; every other service uses the
   * streams as they are, so its NATS user needs no right to change them (deploy/nats/nats.conf
   * gives `STREAM.UPDATE` to the journal's user alone: a service that could update the journal
   * stream could shorten its retention).
   */
  manage?: boolean;
}

/**
 * Makes sure the journal (every partition's) and dead-letter streams exist: each is looked up first and created only
 * when missing; with `manage`, an existing one is brought up to date. Idempotent: every replica of
 * every service calls it at start-up. A caller whose NATS user may not create a missing stream
 * (every service but the journal, deployed) gets a retryable `unavailable` — the journal service
 * creates it when it starts — so its start-up waits for it instead of giving up.
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
    discard: DiscardPolicy.Old,
    max_age: options.maxAgeMs ? nanos(options.maxAgeMs) : 0,
    max_bytes: options.maxBytes ?? -1,
  } satisfies Partial<StreamConfig>;
  const manage = options.manage ?? false;
  // One stream per partition (one, `<prefix>_journal`, unpartitioned): on a cluster each has a
  // leader of its own, which the meta leader places where fewest streams are led.
  const count = subjects.journal.partitionCount;
  for (const partition of subjects.journal.partitions) {
    const description = count > 1 ? partitionDescription(partition.index, count) : undefined;
    await ensureStream(
      jsm,
      {
        ...common,
        name: partition.stream,
        subjects: [partition.all],
        duplicate_window: nanos(options.duplicateWindowMs ?? 120_000),
        ...(description ? { description } : {}),
      },
      manage,
      // A partition of another count is refused before anything of it is changed.
      description
        ? (existing) => {
            if (existing.description !== description)
              throw partitionCountMismatch(partition.stream, existing.description, count);
          }
        : undefined,
    );
  }
  await ensureStream(
    jsm,
    {
      ...common,
      name: subjects.deadLetter.stream,
      subjects: [subjects.deadLetter.all],
      duplicate_window: nanos(120_000),
    },
    manage,
  );
}

/**
 * How many partitions the journal under `prefix` has, read off its streams as they stand: 1 when
 * the unpartitioned `<prefix>_journal` exists, the count partition 0's stream records when it is
 * partitioned (see {@link partitionDescription}), undefined when neither exists. For tools that
 * come to a deployment from outside (`toolgate journal`): the services are told the count and
 * check it against the same record.
 */
export async function journalPartitionCountOf(
  jsm: JetStreamManager,
  prefix: string,
): Promise<number | undefined> {
  const infoOf = (stream: string) =>
    jsm.streams.info(stream).catch((err: unknown) => {
      if (isJsApiError(err, JsApiCode.StreamNotFound)) return undefined;
      throw err;
    });
  if (await infoOf(`${prefix}_journal`)) return 1;
  const first = await infoOf(`${prefix}_journal_0`);
  if (!first) return undefined;
  const count = /^toolgate journal partition 0 of (\d+)$/.exec(first.config.description ?? '');
  if (!count) {
    throw new ConfigError(
      `stream ${prefix}_journal_0 does not say it is a journal partition (its description is ${JSON.stringify(first.config.description ?? '')})`,
      { details: { stream: `${prefix}_journal_0` } },
    );
  }
  return Number(count[1]);
}

/**
 * What a partition's stream says of itself: its place among how many. nats-server 2.9 keeps no
 * stream metadata but the description, and a journal of another count must not be used as this
 * one: its tenants would be looked for in the wrong streams (and a resubmission not found).
 */
function partitionDescription(index: number, count: number): string {
  return `toolgate journal partition ${index} of ${count}`;
}

function partitionCountMismatch(
  stream: string,
  found: string | undefined,
  count: number,
): ConfigError {
  return new ConfigError(
    `journal stream ${stream} is ${found ? `"${found}"` : 'not a partition'}, but this service is configured for ${count} partitions (TOOLGATE_JOURNAL_PARTITIONS): every service of a deployment must be given the journal's partition count, which is fixed when the journal is created`,
    { details: { stream, found: found ?? null, partitions: count } },
  );
}

/**
 * Pauses before a stream's creation is sent again after the broker answered "error creating store
 * for stream" (10049 with status 500, a failure of its own). nats-server 2.9 removes an account's storage directory when its last stream
 * is deleted, and a creation racing that removal finds the directory gone under it: on a broker
 * other teams share, their last stream going is enough. Seen once in a whole `npm test` (every test
 * file deletes its streams as it ends): a service start-up failed on it. A store that stays
 * unmakeable (a full or read-only disk) still fails, after ~1.5 s.
 */
const STORE_RETRY_PAUSES_MS = [50, 100, 200, 400, 800];

/**
 * How long a stream's creation is asked again while the cluster has too few peers to place its
 * replicas on: services start beside a cluster that is still forming (pods of one release), and
 * its meta leader places nothing on a node before that node has joined and sent its first
 * statistics — seen creating an R3 stream right after a cluster's start under load. A cluster
 * that really has too few nodes still fails, after this.
 */
const NO_PEERS_RETRY_MS = 20_000;
const NO_PEERS_PAUSE_MS = 250;

/**
 * Runs `create` (a stream's, a KV bucket's, an object store's creation), asking again while a
 * forming cluster has too few peers for it ({@link NO_PEERS_RETRY_MS}).
 */
export async function whilePeersJoin<T>(create: () => Promise<T>): Promise<T> {
  const until = Date.now() + NO_PEERS_RETRY_MS;
  for (;;) {
    try {
      return await create();
    } catch (err) {
      if (!isJsApiError(err, JsApiCode.ClusterNoPeers) || Date.now() >= until) throw err;
      await new Promise((resolve) => setTimeout(resolve, NO_PEERS_PAUSE_MS));
    }
  }
}

/**
 * Creates a stream, asking again through a store failure ({@link STORE_RETRY_PAUSES_MS}) and while
 * a forming cluster has too few peers for it ({@link whilePeersJoin}).
 */
async function addStream(
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & { name: string },
): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await whilePeersJoin(() => jsm.streams.add(config));
      return;
    } catch (err) {
      const pause = STORE_RETRY_PAUSES_MS[attempt];
      const storeFailed =
        isJsApiError(err, JsApiCode.StreamCreateFailed) &&
        (err as JetStreamApiError).status === 500;
      if (!storeFailed || pause === undefined) throw err;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/** Looks up (or creates) a stream; `check` sees an existing one's configuration before any update. */
async function ensureStream(
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & { name: string },
  manage: boolean,
  check?: (existing: StreamConfig) => void,
): Promise<void> {
  const { name, storage: _storage, retention: _retention, ...mutable } = config;
  try {
    const info = await jsm.streams.info(name);
    check?.(info.config);
  } catch (err) {
    if (!isJsApiError(err, JsApiCode.StreamNotFound)) throw err;
    try {
      await addStream(jsm, config);
      return;
    } catch (addErr) {
      if (isPermissionViolation(addErr)) {
        throw new ToolgateError(
          ErrorCode.Unavailable,
          `stream ${name} does not exist yet, and this NATS user may not create it: the journal service creates it when it starts`,
          { cause: addErr, details: { stream: name } },
        );
      }
      // Another caller created it between our lookup and our create: that is the outcome we want.
      if (!isJsApiError(addErr, JsApiCode.StreamNameInUse)) throw addErr;
      if (check) check((await jsm.streams.info(name)).config);
    }
  }
  if (manage) await whilePeersJoin(() => jsm.streams.update(name, mutable));
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
  /**
   * The journal partition whose stream the consumer reads (default 0: the one stream of an
   * unpartitioned journal). Each partition's consumer has the same name on its own stream.
   */
  partition?: number;
}

/** The partition a consumer spec reads (a `ConfigError` for one the journal does not have). */
export function consumerPartition(subjects: Subjects, spec: Pick<ConsumerSpec, 'partition'>) {
  const index = spec.partition ?? 0;
  const partition = subjects.journal.partitions[index];
  if (!partition) {
    throw new ConfigError(
      `journal partition ${index} does not exist (the journal has ${subjects.journal.partitionCount})`,
    );
  }
  return partition;
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
  const { stream, all, ofType } = consumerPartition(subjects, spec);
  const maxDeliver = spec.maxDeliver ?? 5;
  const config = {
    durable_name: name,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    filter_subject: spec.eventType === '*' ? all : ofType(spec.eventType),
    ack_wait: nanos(spec.ackWaitMs ?? 30_000),
    max_deliver: maxDeliver,
    max_ack_pending: spec.maxAckPending ?? 1000,
  };
  try {
    await jsm.consumers.info(stream, name);
    const { durable_name: _d, deliver_policy: _p, ack_policy: _a, ...mutable } = config;
    await jsm.consumers.update(stream, name, mutable);
  } catch (err) {
    if (!isJsApiError(err, JsApiCode.ConsumerNotFound)) throw err;
    try {
      await jsm.consumers.add(stream, config);
    } catch (addErr) {
      // Another replica created it between our info and add: that is the idempotent outcome.
      if (!isJsApiError(addErr, JsApiCode.ConsumerNameExists)) throw addErr;
    }
  }
  return name;
}
