import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { JournalPublisher, type JournalStreamOptions } from '@toolgate/bus';
import {
  bootstrapService,
  connectNats,
  metricsFor,
  stopOnce,
  Readiness,
  startClean,
  startupStep,
  type RunningService,
} from '@toolgate/service-kit';
import { createSubjects, resolveServiceKeys, type UntrustedReason } from '@toolgate/contracts';
import { sql } from 'kysely';
import { JournalModule } from './app.module';
import type { JournalConfig } from './config';
import { createDb } from './db/create-db';
import { pendingApprovalCounts } from './queries/approval-queries';
import { appliedSequence } from './queries/projection-queries';
import { JournalMetrics } from './service/journal-metrics';
import { ApprovalTimeoutSweeper } from './service/approval-timeout-sweeper';
import { serveQueries } from './service/query-responder';
import { serveRebuild } from './service/rebuild-responder';
import { foldWhatTheConsumerPassed } from './rebuild/startup-fold';

/**
 * Starts the journal: migrations (under the migrator's lock), the projection consumer on every
 * journal event, the read queries, and the approval timeout sweeper.
 */
export async function startJournal(options: {
  config: JournalConfig;
  streams?: JournalStreamOptions;
  logger?: false;
  now?: () => Date;
  /** Where the journal's own progress lines go (default: stdout, unless `logger: false`). */
  log?: (line: string) => void;
}): Promise<RunningService & { sweeper: ApprovalTimeoutSweeper }> {
  const { config } = options;
  const now = options.now ?? (() => new Date());
  const log =
    options.log ??
    (options.logger === false ? () => undefined : (line: string) => console.log(line));
  // Resolved first, for the start-up fold to verify what it folds; the bootstrap is given them.
  const keys = resolveServiceKeys('journal', config.signing);
  return startClean(async (opened) => {
    const handle = opened.add(
      await startupStep(
        config.databaseUrl ? 'opening and migrating PostgreSQL' : 'opening and migrating PGlite',
        () =>
          createDb({
            ...(config.databaseUrl
              ? { url: config.databaseUrl }
              : { pglitePath: config.pglitePath }),
            ...(config.schema ? { schema: config.schema } : {}),
            onConnectionLost: (err) =>
              console.error(`journal: a database connection dropped: ${err.message}`),
          }),
      ),
      (h) => h.db.destroy(),
    );
    // Before the consumer starts: it resumes after what it acknowledged, whatever the database holds.
    // What it skips as untrusted is counted once the bootstrap below has made the metrics.
    const untrustedInFold: UntrustedReason[] = [];
    await startupStep('folding the events the journal consumer passed', async () => {
      const nc = await connectNats(config, 'toolgate-journal-startup-fold', {
        maxReconnectAttempts: 0,
      });
      try {
        await foldWhatTheConsumerPassed(
          handle.db,
          jetstream(nc),
          await jetstreamManager(nc),
          createSubjects(config.prefix, { journalPartitions: config.journalPartitions }),
          log,
          keys,
          (reason) => untrustedInFold.push(reason),
        );
      } finally {
        await nc.close();
      }
    });
    const service = opened.add(
      await bootstrapService({
        name: 'journal',
        keys,
        nats: config,
        metrics: config.metrics,
        prefix: config.prefix,
        port: config.port,
        host: config.host,
        // The journal owns its streams: it creates them and keeps their settings up to date; the
        // other services only use them (their NATS users may not change them).
        streams: {
          maxAgeMs: config.streamMaxAgeMs,
          maxBytes: config.streamMaxBytes,
          ...(options.streams ?? { replicas: config.streamReplicas }),
          manage: true,
        },
        ...(options.logger === false ? { logger: false } : {}),
        module: (nc, subjects) => JournalModule.forRoot(nc, subjects, handle.db),
        transport: {
          role: 'journal',
          // Runs of events in lanes by dispatch (or worktree): a dispatch's events are folded in
          // stream order, different dispatches side by side.
          handlers: {
            '*': {
              batch: config.batchSize,
              batchLingerMs: config.batchLingerMs,
              // A lane set per partition, the lanes spread over them: as many transactions at
              // once, each as full, as on one stream (4 sets of 3 lanes cost the database ~40%
              // more per dispatch in the partitions bench: four times the commits, each smaller).
              batchLanes: Math.ceil(config.lanes / (config.journalPartitions ?? 1)),
              laneKey: createSubjects(config.prefix, {
                journalPartitions: config.journalPartitions,
              }).journal.keyOf,
              maxDeliver: config.maxDeliver,
              ackWaitMs: config.ackWaitMs,
              maxAckPending: config.maxAckPending,
            },
          },
        },
      }),
      (s) => s.stop(),
    );
    // As the rebuild counts what it skips (`fold`): the same reads, over the same stream.
    const countUntrustedInFold = metricsFor(service.nc).untrustedCounter('fold');
    for (const reason of untrustedInFold) countUntrustedInFold(reason);
    service.app.get(Readiness).add({
      name: 'database',
      check: async () => {
        await sql`select 1`.execute(handle.db);
        return true;
      },
    });
    const jsm = await jetstreamManager(service.nc);
    service.app.get(JournalMetrics).collectFromProjection({
      pendingApprovals: () => pendingApprovalCounts(handle.db),
      // Summed over the partitions: the lag (their difference) is the whole journal's.
      positions: async () => {
        const each = await Promise.all(
          service.subjects.journal.partitions.map(async ({ stream }) => {
            const [info, appliedSeq] = await Promise.all([
              jsm.streams.info(stream),
              appliedSequence(handle.db, stream),
            ]);
            return { streamSeq: info.state.last_seq, appliedSeq };
          }),
        );
        return {
          streamSeq: each.reduce((sum, p) => sum + p.streamSeq, 0),
          appliedSeq: each.reduce((sum, p) => sum + p.appliedSeq, 0),
        };
      },
      now,
      onError: (err) => console.error(`journal: metrics: ${(err as Error)?.message ?? err}`),
    });
    const queries = serveQueries(service.nc, service.subjects, handle.db, now, service.keys);
    const rebuilds = serveRebuild(service.nc, service.subjects, handle.db, log, service.keys);
    const sweeper = new ApprovalTimeoutSweeper(
      handle.db,
      service.nc,
      service.subjects,
      service.app.get(JournalPublisher),
      now,
      (err) => console.error(`journal: sweeper: ${(err as Error)?.message ?? err}`),
    );
    sweeper.start(config.sweepIntervalMs);
    const stop = service.stop;
    return {
      ...service,
      sweeper,
      stop: stopOnce(async () => {
        await sweeper.stop();
        await queries.stop();
        await rebuilds.stop();
        await stop();
        await handle.db.destroy();
      }),
    };
  });
}
