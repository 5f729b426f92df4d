import { createHash, randomUUID } from 'node:crypto';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { isTransitionTaken, whilePeersJoin } from '@toolgate/bus';
import { canonicalJson, type Subjects } from '@toolgate/contracts';

/**
 * What an `input_required` answer's `requestState` carries for a call that waits for a person (or
 * is still running): the dispatch it names and what binds it. The SDK's codec seals it with an
 * HMAC under the gateway's secret, an expiry, and a binding to the principal that was answered
 * (tenant and identity); {@link checkParkedCall} binds it to the call, and the ledger to one use.
 */
export interface ParkedCall {
  v: 1;
  runId: string;
  callId: string;
  dispatchId: string;
  tool: string;
  /** {@link callDigest} of the tool name and arguments the state was minted for. */
  digest: string;
  /** Consumed once, server-side ({@link ConsumedStates}). */
  nonce: string;
}

/** sha256 over the canonical JSON of (tool name, arguments): the call a state is bound to. */
export function callDigest(tool: string, args: unknown): string {
  return createHash('sha256')
    .update(canonicalJson([tool, args ?? {}]), 'utf8')
    .digest('hex');
}

/** A fresh state for a pending dispatch. */
export function parkedCall(
  ids: { runId: string; callId: string; dispatchId: string },
  tool: string,
  args: unknown,
): ParkedCall {
  return { v: 1, ...ids, tool, digest: callDigest(tool, args), nonce: randomUUID() };
}

/**
 * Why an echoed state does not name this call, or null when it does: a state minted for one
 * call never carries another (other arguments, another tool) to its approval.
 */
export function checkParkedCall(state: unknown, tool: string, args: unknown): string | null {
  if (typeof state !== 'object' || state === null) return 'malformed';
  const s = state as Partial<ParkedCall>;
  if (s.v !== 1 || typeof s.nonce !== 'string' || typeof s.dispatchId !== 'string')
    return 'malformed';
  if (s.tool !== tool || s.digest !== callDigest(tool, args)) return 'another call';
  return null;
}

/**
 * The nonces of states already used, in a JetStream KV bucket shared by every gateway replica:
 * `create` succeeds for the first use only (the broker refuses a second create of a key), so a
 * replayed state is refused however many replicas it is sent to. Keys age out after the states'
 * lifetime, past which the codec refuses them anyway.
 */
export class ConsumedStates {
  private constructor(private readonly kv: KV) {}

  static async open(
    nc: NatsConnection,
    subjects: Subjects,
    options: { ttlMs: number; replicas?: number },
  ): Promise<ConsumedStates> {
    const kv = await whilePeersJoin(() =>
      new Kvm(nc).create(subjects.mcpStateBucket, {
        history: 1,
        replicas: options.replicas ?? 1,
        // Twice the states' lifetime: a state cannot outlive its nonce's record.
        ttl: options.ttlMs * 2,
      }),
    );
    return new ConsumedStates(kv);
  }

  /** Records `nonce` as used; false when it was used before (here or on another replica). */
  async consume(nonce: string): Promise<boolean> {
    if (!/^[0-9a-f-]{36}$/.test(nonce)) return false;
    try {
      await this.kv.create(nonce, new Uint8Array(0));
      return true;
    } catch (err) {
      // The one refusal that means "used": the key exists. Anything else (broker down) throws.
      if (isTransitionTaken(err)) return false;
      throw err;
    }
  }
}
