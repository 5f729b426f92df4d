import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import {
  ConfigError,
  createSubjects,
  ErrorCode,
  resolveServiceKeys,
  ServiceIdentity,
  ToolgateError,
  type ServiceKeys,
  type SigningSettings,
  type Subjects,
} from '@toolgate/contracts';
import { UsageError } from '../commands/cli-input';

/** The operator's way onto the bus: the same variables the services read. */
export interface BusSettings {
  url: string;
  user?: string | undefined;
  password?: string | undefined;
  prefix: string;
  /**
   * The journal's partition count (`TOOLGATE_JOURNAL_PARTITIONS`), when given: checked against the
   * count the journal's streams record. Unset: read off the streams.
   */
  journalPartitions?: number | undefined;
  /** The operator's signing keys (identity `ops`): the services' variables, or the dev keyring. */
  signing: SigningSettings;
}

/** A connection for one command, closed by `close()`. */
export interface BusConnection {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  subjects: Subjects;
  /**
   * The subjects with the journal's partitions as its streams record them (`journal tail`, `stats`:
   * a partitioned journal is read stream by stream), or as `TOOLGATE_JOURNAL_PARTITIONS` gives them
   * when there is no journal yet. A `config` error when the two disagree, as a service gets.
   */
  journalSubjects(): Promise<Subjects>;
  /**
   * The operator's signing keys (`ops`), resolved on first use: a `config` error when they are
   * required and not configured. Requests to the services are signed with them, and `journal
   * tail` verifies with them.
   */
  keys(): ServiceKeys;
  close(): Promise<void>;
}

/**
 * Connects to NATS as an operator: `NATS_URL`, `NATS_USER`, `NATS_PASSWORD` and `TOOLGATE_PREFIX`,
 * as the services read them (a deployment gives operators a NATS user of their own; see
 * docs/cli.md). No reconnect: a command that loses the broker fails as `unavailable` and says so.
 * The client is loaded here, so commands that do not use the bus do not pay for it.
 */
export async function connectBus(settings: BusSettings): Promise<BusConnection> {
  let subjects: Subjects;
  try {
    subjects = createSubjects(settings.prefix);
  } catch (err) {
    throw new UsageError(`--prefix: ${(err as Error).message}`);
  }
  const [{ connect }, { jetstream, jetstreamManager }] = await Promise.all([
    import('@nats-io/transport-node'),
    import('@nats-io/jetstream'),
  ]);
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: settings.url.split(',').map((s) => s.trim()),
      name: 'toolgate-cli',
      maxReconnectAttempts: 0,
      timeout: 5_000,
      noAsyncTraces: true,
      ...(settings.user ? { user: settings.user } : {}),
      ...(settings.password ? { pass: settings.password } : {}),
    });
  } catch (cause) {
    const denied = (cause as Error)?.name === 'AuthorizationError';
    throw new ToolgateError(
      denied ? ErrorCode.Unauthorized : ErrorCode.Unavailable,
      denied
        ? `NATS at ${settings.url} refused these credentials (NATS_USER / NATS_PASSWORD)`
        : `cannot reach NATS at ${settings.url}`,
      { cause },
    );
  }
  let jsm: JetStreamManager;
  try {
    // Its first request (the account's info) is the cluster's meta leader's to answer: asked again
    // while one is elected (a node just died), within the election budget.
    const { apiThroughElection } = await import('@toolgate/bus');
    jsm = await apiThroughElection(() => jetstreamManager(nc));
  } catch (cause) {
    await nc.close();
    const name = (cause as Error)?.name;
    throw new ToolgateError(
      ErrorCode.Unavailable,
      name === 'TimeoutError'
        ? `JetStream at ${settings.url} did not answer in time; retry later`
        : `JetStream at ${settings.url} is not available: ${(cause as Error)?.message ?? cause}`,
      { cause },
    );
  }
  let keys: ServiceKeys | undefined;
  return {
    nc,
    js: jetstream(nc),
    jsm,
    subjects,
    journalSubjects: async () => {
      const { journalPartitionCountOf } = await import('@toolgate/bus');
      const recorded = await journalPartitionCountOf(jsm, settings.prefix);
      const given = settings.journalPartitions;
      if (recorded !== undefined && given !== undefined && recorded !== given) {
        throw new ConfigError(
          `the journal under ${settings.prefix} has ${recorded} partition${recorded === 1 ? '' : 's'}, but TOOLGATE_JOURNAL_PARTITIONS says ${given}`,
          { details: { recorded, given } },
        );
      }
      const count = recorded ?? given ?? 1;
      return count === 1 ? subjects : createSubjects(settings.prefix, { journalPartitions: count });
    },
    keys: () => (keys ??= resolveServiceKeys(ServiceIdentity.Ops, settings.signing)),
    close: async () => {
      if (!nc.isClosed()) await nc.close();
    },
  };
}
