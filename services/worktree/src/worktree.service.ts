import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { ServiceKeys, Subjects } from '@toolgate/contracts';
import { ensureJournalStreams, type JournalStreamOptions } from '@toolgate/bus';
import type { ArtifactPort, Clock, JournalPort } from './lifecycle/ports';
import { WorktreeManager, type RecoveryReport } from './lifecycle/worktree-manager';
import { createObjectStoreArtifacts } from './nats/object-store-artifacts';
import { journalPortOf } from './nats/journal-port';
import {
  serveWorktreeRequests,
  type WorktreeRequestOptions,
} from './nats/worktree-request-handlers';

/** Options of {@link startWorktreeService}. */
export interface WorktreeServiceOptions {
  nc: NatsConnection;
  subjects: Subjects;
  /** The worktree service's signing keys: it signs its events and verifies every request. */
  keys: ServiceKeys;
  /** The volume trees and their records live on; outside every host repository. */
  root: string;
  /** Retained trees kept at most (default 4). */
  pinCap?: number;
  /** Whether a failed agent's tree is retained when its dispose does not say. Default false. */
  keepOnError?: boolean;
  /** The repository an acquire without `repo` branches from (the host's checkout). */
  repo?: string;
  /** Repositories an acquire may name; see {@link WorktreeRequestOptions.allowedRepos}. */
  allowedRepos?: string[];
  /**
   * Replicas and storage of the journal streams and the artifact bucket. The streams are upserted,
   * so this must match what every other service is given: fewer replicas here would scale the
   * shared journal down.
   */
  streams?: JournalStreamOptions;
  /** Ports to use instead of the NATS ones (the journal stream and bucket are then not touched). */
  journal?: JournalPort;
  artifacts?: ArtifactPort;
  now?: Clock;
  onInternalError?: WorktreeRequestOptions['onInternalError'];
}

/** A running worktree service. */
export interface RunningWorktreeService {
  manager: WorktreeManager;
  /** What start-up recovery found on the volume. */
  recovery: RecoveryReport;
  /** Stops answering requests and waits for the ones in flight. The connection stays open. */
  stop(): Promise<void>;
}

/**
 * Starts the worktree service on a connection: makes sure the journal streams and the artifact
 * bucket exist, reconciles the root with what is on disk, then answers acquire/collect/dispose
 * requests. Framework-free; a NestJS module wraps it.
 */
export async function startWorktreeService(
  options: WorktreeServiceOptions,
): Promise<RunningWorktreeService> {
  const { nc, subjects, streams = {} } = options;
  let journal = options.journal;
  if (!journal) {
    await ensureJournalStreams(await jetstreamManager(nc), subjects, streams);
    journal = journalPortOf(nc, subjects, options.keys);
  }
  const artifacts =
    options.artifacts ??
    (await createObjectStoreArtifacts(nc, subjects.artifactsBucket, {
      ...(streams.storage ? { storage: streams.storage } : {}),
      ...(streams.replicas ? { replicas: streams.replicas } : {}),
    }));
  const { manager, recovery } = await WorktreeManager.open({
    root: options.root,
    journal,
    artifacts,
    ...(options.pinCap !== undefined ? { pinCap: options.pinCap } : {}),
    ...(options.keepOnError !== undefined ? { keepOnError: options.keepOnError } : {}),
    ...(options.repo !== undefined ? { defaultRepo: options.repo } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  const server = await serveWorktreeRequests(nc, subjects, manager, {
    keys: options.keys,
    ...(options.allowedRepos ? { allowedRepos: options.allowedRepos } : {}),
    ...(options.onInternalError ? { onInternalError: options.onInternalError } : {}),
  });
  return { manager, recovery, stop: () => server.stop() };
}
