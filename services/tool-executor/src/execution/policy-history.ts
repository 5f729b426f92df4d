import type { NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JetStreamManager } from '@nats-io/jetstream';
import {
  DirectGets,
  isJsApiError,
  JsApiCode,
  type DirectMessage,
  type DirectQuery,
  type ReadFrom,
} from '@toolgate/bus';
import type { Subjects } from '@toolgate/contracts';
import { revisionExisted, type PolicyHistory } from './call-checks';

/**
 * How far the evaluator's mirror of the policy bucket may lag the bucket (and the executor's clock
 * the broker's) when a revision is checked against the time a decision was recorded.
 */
const POLICY_LAG_TOLERANCE_MS = 2000;

/** No policy was ever stored (no bucket). */
const NO_HISTORY: PolicyHistory = { atRevision: null, oldest: null, newest: null };

/** Most (tenant, revision) answers kept; past it the cache starts over. */
const CACHE_LIMIT = 10_000;

/**
 * Reads a tenant's policy history from the policy bucket (`PolicyStore`'s JetStream KV: a revision
 * is the sequence its value was stored at in the bucket's stream, `KV_<bucket>`, on subject
 * `$KV.<bucket>.<tenant>` — the KV layout of ADR-8), and answers whether a decision's revision
 * existed when it was recorded (`revisionExisted`). Three direct gets, answered from a cache when
 * they cannot tell anything new: a decision recorded within the tolerance of an earlier read is
 * judged on that read (a write after it cannot have been in force before it, within the tolerance).
 */
export class PolicyRevisions {
  private jsm: Promise<JetStreamManager> | undefined;
  private readonly direct: DirectGets;
  private readonly cache = new Map<string, { history: PolicyHistory; readAtMs: number }>();
  private readonly stream: string;
  private readonly subjectPrefix: string;
  private bucketExists = false;

  constructor(
    private readonly nc: NatsConnection,
    subjects: Subjects,
    private readonly now: () => number = Date.now,
  ) {
    this.direct = new DirectGets(nc);
    this.stream = `KV_${subjects.policyBucket}`;
    this.subjectPrefix = `$KV.${subjects.policyBucket}.`;
  }

  /** Whether `revision` was (or could have been) the tenant's policy at `decidedAtMs` (broker clock). */
  async existed(tenant: string, revision: number, decidedAtMs: number): Promise<boolean> {
    const key = `${tenant}\u0000${revision}`;
    const cached = this.cache.get(key);
    if (
      cached &&
      decidedAtMs <= cached.readAtMs + POLICY_LAG_TOLERANCE_MS &&
      revisionExisted(revision, decidedAtMs, cached.history, POLICY_LAG_TOLERANCE_MS)
    )
      return true;
    const readAtMs = this.now();
    let history = await this.read(tenant, revision);
    // A "no" refuses a genuine decision: it is confirmed on the bucket stream's leader, which has
    // applied every write it acknowledged (a replica that lags it may not have the revision yet).
    if (!revisionExisted(revision, decidedAtMs, history, POLICY_LAG_TOLERANCE_MS))
      history = await this.read(tenant, revision, 'leader');
    if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
    this.cache.set(key, { history, readAtMs });
    return revisionExisted(revision, decidedAtMs, history, POLICY_LAG_TOLERANCE_MS);
  }

  /**
   * The facts `revisionExisted` needs, as the bucket holds them now: as any replica of its stream
   * has them (direct gets), or as its leader has them.
   */
  async read(tenant: string, revision: number, from: ReadFrom = 'replica'): Promise<PolicyHistory> {
    this.jsm ??= jetstream(this.nc).jetstreamManager(false);
    const jsm = await this.jsm;
    // A direct get on a stream that does not exist is never answered (it times out), so whether
    // the bucket exists is asked first; once it does, it is not asked again.
    if (!this.bucketExists) {
      try {
        await jsm.streams.info(this.stream);
        this.bucketExists = true;
      } catch (err) {
        if (isJsApiError(err, JsApiCode.StreamNotFound)) return NO_HISTORY;
        throw err;
      }
    }
    const subject = this.subjectPrefix + tenant;
    const get = (query: DirectQuery) => this.direct.read(this.stream, query, from);
    const [at, oldest, newest] = await Promise.all([
      revision > 0 ? get({ seq: revision }) : Promise.resolve(null),
      get({ seq: 1, next_by_subj: subject }),
      get({ last_by_subj: subject }),
    ]);
    return {
      atRevision: at
        ? { ownTenant: at.subject === subject, isValue: isValue(at), storedAtMs: at.time.getTime() }
        : null,
      oldest: oldest ? { revision: oldest.seq, storedAtMs: oldest.time.getTime() } : null,
      newest: newest
        ? { revision: newest.seq, isValue: isValue(newest), storedAtMs: newest.time.getTime() }
        : null,
    };
  }
}

/** A KV value, not a delete or purge marker (`KV-Operation: DEL|PURGE`). */
function isValue(msg: DirectMessage): boolean {
  const op = msg.header?.get('KV-Operation');
  return !op || op === 'PUT';
}
