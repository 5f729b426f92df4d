import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  ErrorCode,
  PolicyWhatIfRequestSchema,
  ToolgateError,
  type PolicyWhatIfReport,
  type Progress,
  type EventKeys,
  type Subjects,
  type UntrustedReason,
} from '@toolgate/contracts';
import { readJournalCalls } from '@toolgate/bus';
import { PolicyReplay, WhatIfTally } from '@toolgate/policy-runtime';
import { parseRequest } from '../api/parse-request';

/** Progress is reported at most this often (messages read between two reports). */
const PROGRESS_EVERY = 2_000;

/**
 * Policy what-if at the gateway: replays one tenant's recorded calls through a candidate policy
 * (`PolicyReplay`, the pure chain with stand-ins for remote hooks) straight from the journal
 * stream, and adds them up into a report. Read only; the candidate is validated as a put would be
 * and never stored.
 *
 * A what-if is CPU work on the gateway (tens of thousands of calls a second, see the bench's
 * `policy.whatifCallsPerSec`), so a replica runs `maxConcurrent` at a time and answers
 * `unavailable` (retryable) beyond that rather than slow every dispatch it serves.
 */
export class PolicyWhatIf {
  private running = 0;
  private jsm: Promise<JetStreamManager> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    /** The gateway's keys: a recorded call not signed by its producer is not replayed. */
    private readonly keys: EventKeys,
    private readonly maxConcurrent = 1,
    /** Told about each message skipped as untrusted (metrics). Must not throw. */
    private readonly onUntrusted?: (reason: UntrustedReason) => void,
  ) {}

  async run(
    tenant: string,
    body: unknown,
    options: { onProgress?: (progress: Progress) => void; signal?: AbortSignal } = {},
  ): Promise<PolicyWhatIfReport> {
    const { onProgress, signal } = options;
    const req = parseRequest(PolicyWhatIfRequestSchema, body);
    const replay = PolicyReplay.compile(req.candidate);
    if (this.running >= this.maxConcurrent)
      throw new ToolgateError(
        ErrorCode.Unavailable,
        'a policy what-if is already running on this gateway; try again when it is done',
      );
    this.running++;
    try {
      this.jsm ??= jetstreamManager(this.nc);
      const jsm = await this.jsm;
      const tally = new WhatIfTally(req.limit, { since: req.since, runId: req.runId });
      const reader = readJournalCalls(
        jetstream(this.nc),
        jsm,
        this.subjects,
        {
          tenant,
          runId: req.runId,
          ...(req.since !== undefined ? { since: new Date(req.since) } : {}),
        },
        {
          progressEvery: PROGRESS_EVERY,
          keys: this.keys,
          ...(this.onUntrusted ? { onUntrusted: this.onUntrusted } : {}),
          ...(signal ? { signal } : {}),
          ...(onProgress
            ? { onProgress: (s) => onProgress({ done: s.read, total: s.total }) }
            : {}),
        },
      );
      for await (const call of reader) tally.add(call, await replay.replay(call));
      tally.addUndecided(reader.stats.undecided);
      if (reader.stats.firstSeq > 0) {
        tally.saw(reader.stats.firstSeq);
        tally.saw(reader.stats.lastSeq);
      }
      return tally.report();
    } finally {
      this.running--;
    }
  }
}
