import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  errorCapOfRule,
  ErrorCode,
  PolicyWhatIfRequestSchema,
  type WhatIfErrorCapMark,
  ToolgateError,
  type PolicyWhatIfReport,
  type Progress,
  type EventKeys,
  type Subjects,
  type UntrustedReason,
} from '@toolgate/contracts';
import { readJournalCalls } from '@toolgate/bus';
import {
  ErrorCapReplay,
  PolicyReplay,
  WhatIfTally,
  type ReplayedCall,
} from '@toolgate/policy-runtime';
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
      // The runs' error streaks replayed beside the chain: a candidate that denies more trips the
      // cap on calls it would otherwise let through (and one that denies less lifts it).
      const streaks = new ErrorCapReplay(replay.errorCap);
      const tally = new WhatIfTally(
        req.limit,
        { since: req.since, runId: req.runId },
        { cap: replay.errorCap },
      );
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
          onSettled: (settled) => streaks.settled(settled.dispatchId, settled.outcome),
          ...(this.onUntrusted ? { onUntrusted: this.onUntrusted } : {}),
          ...(signal ? { signal } : {}),
          ...(onProgress
            ? { onProgress: (s) => onProgress({ done: s.read, total: s.total }) }
            : {}),
        },
      );
      for await (const call of reader) {
        const { runId, dispatchId } = call.decided;
        const recordedCap = errorCapOfRule(call.decided.rule) !== null;
        const recorded = recordedCap ? 'error-cap' : call.decided.verdict;
        const standing = streaks.standing(runId);
        let replayed: ReplayedCall;
        let mark: WhatIfErrorCapMark | undefined;
        if (standing.mark === 'refused') {
          // Refused then too: the same refusal, skipped as before.
          replayed = recordedCap
            ? { kind: 'error-cap' }
            : replay.refusedByErrorCap(call, standing.failures);
          if (!recordedCap) mark = 'refused';
          streaks.decided(runId, dispatchId, recorded, 'deny');
        } else {
          replayed = await replay.replay(call, { throughErrorCap: true });
          if (replayed.kind === 'replayed') {
            mark = standing.mark === 'possible' ? 'possible' : recordedCap ? 'lifted' : undefined;
            streaks.decided(runId, dispatchId, recorded, replayed.after.verdict);
          }
        }
        tally.add(call, replayed, mark);
      }
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
