import { createInbox, type NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  JournalOperation,
  JournalOpsFrameSchema,
  ServiceIdentity,
  ToolgateError,
  fromWireError,
  type JournalOpsFrame,
  type JournalRebuildReport,
  type JournalRebuildRequest,
  type ServiceKeys,
  type Subjects,
} from '@toolgate/contracts';
import { leanHeaders } from './lean-headers';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** How long {@link requestJournalRebuild} waits for the journal's next word by default. */
export const REBUILD_SILENCE_MS = 60_000;

/** A rebuild's progress frame: its phase, and how far into it. */
export type JournalRebuildProgress = Extract<JournalOpsFrame, { progress: unknown }>['progress'];

/** Options of {@link requestJournalRebuild}. */
export interface JournalRebuildRequestOptions {
  /** Called for each progress frame, in order. */
  onProgress?(progress: JournalRebuildProgress): void;
  /** How long the journal may fall silent before this gives up (default {@link REBUILD_SILENCE_MS}). */
  silenceMs?: number;
}

/**
 * Asks the journal service for a rebuild (`subjects.ops(rebuild)`, signed with `keys` — an
 * operator's, `ops` — for the journal) and reads its answer on an inbox of its own: progress frames,
 * each handed to `onProgress`, then the report, returned, or a typed error, thrown
 * (`fromWireError`). One request with several replies, which {@link InboxRequests} and
 * `requestReply` (one reply each) do not read. No journal serving the subject (the broker's
 * no-responders status), a journal silent for `silenceMs`, or an answer that ends without a
 * report is `unavailable`; a frame that is not one of `JournalOpsFrame`'s shapes is `internal`.
 * `toolgate journal rebuild` and the journal's own tests send it.
 */
export async function requestJournalRebuild(
  nc: NatsConnection,
  subjects: Subjects,
  keys: ServiceKeys,
  body: JournalRebuildRequest,
  options: JournalRebuildRequestOptions = {},
): Promise<JournalRebuildReport> {
  const silenceMs = options.silenceMs ?? REBUILD_SILENCE_MS;
  const subject = subjects.ops(JournalOperation.Rebuild);
  const payload = encoder.encode(JSON.stringify(body));
  const headers = leanHeaders();
  keys.signRequest(subject, ServiceIdentity.Journal, payload, headers);
  const inbox = nc.subscribe(createInbox());
  let timer: NodeJS.Timeout | undefined;
  let silent = false;
  const watch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      silent = true;
      inbox.unsubscribe();
    }, silenceMs);
  };
  try {
    watch();
    nc.publish(subject, payload, { reply: inbox.getSubject(), headers });
    for await (const m of inbox) {
      watch();
      if (m.headers?.code === 503 || m.data.length === 0)
        throw new ToolgateError(
          ErrorCode.Unavailable,
          `no journal service answers on ${subject} (is it running, with this TOOLGATE_PREFIX?)`,
        );
      const frame = parseFrame(m.data);
      if ('progress' in frame) options.onProgress?.(frame.progress);
      else if ('report' in frame) return frame.report;
      else throw fromWireError(frame.error);
    }
    throw new ToolgateError(
      ErrorCode.Unavailable,
      silent
        ? `the journal service stopped answering (nothing for ${silenceMs / 1000} s); its log says how the rebuild ended`
        : 'the answer ended without a report',
    );
  } finally {
    clearTimeout(timer);
    inbox.unsubscribe();
  }
}

function parseFrame(data: Uint8Array) {
  let json: unknown;
  try {
    json = JSON.parse(decoder.decode(data));
  } catch {
    json = undefined;
  }
  const parsed = JournalOpsFrameSchema.safeParse(json);
  if (!parsed.success)
    throw new ToolgateError(ErrorCode.Internal, 'malformed answer from the journal service');
  return parsed.data;
}
