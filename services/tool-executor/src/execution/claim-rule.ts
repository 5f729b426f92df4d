/**
 * Who may run a call: the claim on a dispatch's attempts (pure: facts and time come in).
 *
 * The claim is the attempt record itself. A replica runs a call only after the broker accepted its
 * `started` with `expect.lastSubjectSequence` = the sequence of the last `started` it saw (0 for
 * none): a compare-and-set on the dispatch's `started` subject, so of two replicas holding the same
 * decision, one claims and the other learns it lost — at no journal append beyond the `started`
 * every attempt records anyway. Whoever does not hold the claim never runs the tool: it waits for
 * the settlement (acks once it is there), and takes a claim over only from a holder presumed gone.
 */

/** The current claim: the dispatch's last `started`, as the journal holds it. */
export interface CurrentClaim {
  /** Its stream sequence: what a takeover compares-and-sets against. */
  seq: number;
  /** The event that authorised it (decided or resolved); null when it could not be read. */
  causationId: string | null;
  /** The delivery count of the decision that made it (0 when it could not be read). */
  attempt: number;
  /** When the broker stored it (ms since the epoch, broker clock). */
  storedAtMs: number;
  /**
   * Nobody who may write a `started` signed it (a forgery on an open broker): no claim at all. It
   * is superseded at once (a compare-and-set on its sequence), never waited out.
   */
  forged?: boolean;
}

/** What the journal says about a dispatch's attempts. */
export interface AttemptsView {
  settled: boolean;
  started: CurrentClaim | null;
}

/** The delivery asking for the claim. */
export interface ClaimAsk {
  /** The id of the decision (or resolution) being delivered. */
  causationId: string;
  deliveryCount: number;
  nowMs: number;
  /**
   * How long a claim stays live without a settlement: the call's deadline plus a grace. A holder
   * that is still running cannot be past it (its tool is aborted at the deadline, and it settles
   * within the grace), so past it the holder is gone.
   */
  leaseMs: number;
}

/** What the delivery does next. */
export type ClaimStep =
  /** The dispatch is settled: never run; ack. */
  | { kind: 'settled' }
  /** Append `started` expecting this last sequence on its subject (0: first claim; else takeover). */
  | { kind: 'claim'; expectSeq: number; takeover: boolean }
  /** Another holder is live: keep the message, look again by `untilMs` at the latest. */
  | { kind: 'wait'; untilMs: number };

export function decideClaim(view: AttemptsView, ask: ClaimAsk): ClaimStep {
  if (view.settled) return { kind: 'settled' };
  const claim = view.started;
  if (!claim) return { kind: 'claim', expectSeq: 0, takeover: false };
  if (claim.forged) return { kind: 'claim', expectSeq: claim.seq, takeover: false };
  // The broker delivered this decision again after the delivery that claimed it: that delivery
  // went a whole ack wait without a heartbeat (its replica died or lost the broker) or gave the
  // message back. Its holder is presumed gone.
  if (claim.causationId === ask.causationId && claim.attempt < ask.deliveryCount) {
    return { kind: 'claim', expectSeq: claim.seq, takeover: true };
  }
  // A claim of the same or a later delivery (a recreated consumer counts from 1 again), of another
  // decision of the same dispatch, or an unreadable record: live until its lease runs out. (A
  // delivery knows its own claim from its append's answer, never from a read.)
  const expiresAtMs = claim.storedAtMs + ask.leaseMs;
  if (ask.nowMs >= expiresAtMs) return { kind: 'claim', expectSeq: claim.seq, takeover: true };
  return { kind: 'wait', untilMs: expiresAtMs };
}
