import { jetstream } from '@nats-io/jetstream';
import { messagingFailure } from '@toolgate/bus';
import type { Msg, NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  JournalOperation,
  JournalRebuildRequestSchema,
  ToolgateError,
  toWireError,
  requestSigningOf,
  type JournalOpsFrame,
  type ServiceKeys,
  type Subjects,
} from '@toolgate/contracts';
import { checkSignedRequest, metricsFor } from '@toolgate/service-kit';
import type { Kysely } from 'kysely';
import type { Database } from '../db/database';
import { readJournal } from '../rebuild/read-journal';
import { rebuildAndSwitch } from '../rebuild/projection-switch';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
/** A progress frame at most this often: the caller's sign of life, and its progress bar. */
const PROGRESS_EVERY_MS = 500;

/**
 * Serves `toolgate journal rebuild` on `subjects.ops(rebuild)`, in the journal's queue group (one
 * replica answers). The answer goes to the request's reply subject as several messages: progress
 * frames, then the report or a typed error (`JournalOpsFrame`). One rebuild runs at a time on a
 * database (an advisory lock across replicas); a second one is refused with `conflict`. Only an
 * operator's request (signed by `ops`, see `requestSigningOf`) is served; anything else gets
 * `unauthorized`. The rebuild folds only what is signed for the journal by its producer.
 */
export function serveRebuild(
  nc: NatsConnection,
  subjects: Subjects,
  db: Kysely<Database>,
  log: (line: string) => void,
  keys: ServiceKeys,
): { stop(): Promise<void> } {
  const js = jetstream(nc);
  const subject = subjects.ops(JournalOperation.Rebuild);
  const { requesters } = requestSigningOf(subjects, subject);
  const partitioned = subjects.journal.partitionCount > 1;
  const partitionIndex = new Map(subjects.journal.partitions.map((p) => [p.stream, p.index]));
  const metrics = metricsFor(nc);
  const untrustedRequest = metrics.untrustedCounter('request');
  const untrustedEvent = metrics.untrustedCounter('fold');
  const inFlight = new Set<Promise<void>>();
  const sub = nc.subscribe(subject, {
    queue: `${subjects.prefix}-journal`,
    callback: (err, msg) => {
      if (err || !msg.reply) return;
      const task = rebuild(msg).catch(() => undefined);
      inFlight.add(task);
      void task.finally(() => inFlight.delete(task));
    },
  });

  async function rebuild(msg: Msg): Promise<void> {
    const send = (frame: JournalOpsFrame) => msg.respond(encoder.encode(JSON.stringify(frame)));
    try {
      checkSignedRequest(keys, msg, requesters, untrustedRequest);
      let body: unknown = {};
      try {
        body = msg.data.length ? JSON.parse(decoder.decode(msg.data)) : {};
      } catch {
        throw new ToolgateError(ErrorCode.InvalidRequest, 'malformed request body (expected JSON)');
      }
      const parsed = JournalRebuildRequestSchema.safeParse(body);
      if (!parsed.success)
        throw new ToolgateError(
          ErrorCode.InvalidRequest,
          `invalid request: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(body)'}: ${i.message}`).join('; ')}`,
        );
      log(`journal: rebuild requested${parsed.data.into ? ` into ${parsed.data.into}` : ''}`);
      let last = 0;
      const report = await rebuildAndSwitch(db, {
        into: parsed.data.into,
        force: parsed.data.force,
        // A partitioned journal: each partition's stream with its own sequences.
        ...(partitioned ? { streams: subjects.journal.partitions.map((p) => p.stream) } : {}),
        read: (fromSeq, stream) =>
          readJournal(js, subjects, {
            fromSeq,
            keys,
            onUntrusted: untrustedEvent,
            ...(partitioned ? { partition: partitionIndex.get(stream!)! } : {}),
          }),
        onProgress: (phase, done, total) => {
          const now = Date.now();
          if (now - last < PROGRESS_EVERY_MS && done < total) return;
          last = now;
          send({ progress: { phase, done, total } });
        },
      });
      log(
        report.switched
          ? `journal: rebuilt ${report.events} events into ${report.into} and switched: ${report.live} now serves the rebuilt projection, ${report.into} holds the replaced one`
          : `journal: rebuilt ${report.events} events into ${report.into}, not switched: ${report.reason}`,
      );
      send({ report });
    } catch (e) {
      // The broker not answering (an election that outlasted the reads' budget) is `unavailable`:
      // the operator runs it again.
      const error = toWireError(messagingFailure(e, 'the message broker') ?? e);
      log(`journal: rebuild failed: ${error.code}: ${error.message}`);
      send({ error });
    }
  }

  return {
    async stop() {
      sub.unsubscribe();
      await Promise.allSettled([...inFlight]);
    },
  };
}
