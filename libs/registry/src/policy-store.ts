import type { NatsConnection } from '@nats-io/transport-node';
import { assertSubjectToken, ErrorCode, ToolgateError, type Subjects } from '@toolgate/contracts';
import { KvCache, KvRevisionConflict } from './kv-cache';

/** A tenant's policy document at a revision (the KV revision it was written at). */
export interface PolicyAtRevision {
  revision: number;
  document: Record<string, unknown>;
}

/**
 * Per-tenant permission policies, revisioned and hot-reloaded: the gateway writes, the evaluator
 * reads from its in-memory mirror and records the revision each dispatch was decided under.
 * Revision 0 means "no policy stored": the chain is then the empty one (allow, ask on needsApproval).
 */
export class PolicyStore {
  private constructor(private readonly cache: KvCache<Record<string, unknown>>) {}

  static async open(
    nc: NatsConnection,
    subjects: Subjects,
    options: { replicas?: number } = {},
  ): Promise<PolicyStore> {
    const cache = await KvCache.open<Record<string, unknown>>(
      nc,
      subjects.policyBucket,
      (raw) =>
        typeof raw === 'object' && raw !== null && !Array.isArray(raw)
          ? (raw as Record<string, unknown>)
          : null,
      options,
    );
    return new PolicyStore(cache);
  }

  get(tenant: string): PolicyAtRevision {
    const entry = this.cache.get(tenant);
    return entry
      ? { revision: entry.revision, document: entry.value }
      : { revision: 0, document: {} };
  }

  /**
   * Stores a (validated) document. With `expectedRevision`, fails with `conflict` unless the
   * current revision is that one (0: none stored yet).
   */
  async put(
    tenant: string,
    document: Record<string, unknown>,
    expectedRevision?: number,
  ): Promise<number> {
    assertSubjectToken('tenant', tenant);
    try {
      return await this.cache.write(tenant, document, expectedRevision);
    } catch (cause) {
      if (!(cause instanceof KvRevisionConflict)) throw cause;
      throw new ToolgateError(
        ErrorCode.Conflict,
        `policy changed since revision ${expectedRevision}`,
        {
          details: { expectedRevision, currentRevision: this.get(tenant).revision },
          cause,
        },
      );
    }
  }

  stop(): void {
    this.cache.stop();
  }
}
