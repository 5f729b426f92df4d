import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { headers as natsHeaders } from '@nats-io/transport-node';
import {
  createSubjects,
  EVENT_SIGNING,
  generateKeySet,
  ServiceKeys,
  signToolRequest,
} from '@toolgate/contracts';
import { callEvents } from '@toolgate/testing';
import { median, round, since } from './stats';

/** What signing costs per event, measured in the same run as the dispatch figures. */
export interface SigningCost {
  /**
   * µs to sign one `decided` for all its readers, headers set: signing v2, one SHA-256 of the event
   * and a 35-byte HMAC per reader (see `contracts/src/signing.ts`).
   */
  signCostUs: number;
  /** µs for one reader to verify it (the check every consumer, get and wait makes). */
  verifyCostUs: number;
  /** Readers `decided` is signed for (MACs per sign). */
  signReaders: number;
  /** µs for one Ed25519 verify of the same bytes: the scheme not chosen (docs/threat-model.md). */
  ed25519VerifyUs: number;
  /**
   * µs to sign one remote tool request as the executor does for every remote call (Ed25519 with
   * its tool-request key, a fresh nonce; docs/bus-protocol.md): a worker holds only the public key.
   */
  toolRequestSignUs: number;
}

/** The events of one sample dispatch of `tool` (tenant `bench`, run `run-1`): what the bench signs. */
export function sampleCall(tool: string): ReturnType<typeof callEvents> {
  return callEvents({
    dispatchId: 'd'.repeat(43),
    tenant: 'bench',
    runId: 'run-1',
    tool,
    input: { command: 'git status --porcelain' },
  });
}

/**
 * Times `ServiceKeys.signEvent` and `verifyEvent` on a real `decided` event (its JSON as the
 * evaluator publishes it), an Ed25519 verify for comparison and the executor's Ed25519 signature of
 * a tool request; the median of several rounds.
 */
export function benchSigning(opts: { quick: boolean }): SigningCost {
  const set = generateKeySet();
  const evaluator = ServiceKeys.ofSet('permission-evaluator', set);
  const executor = ServiceKeys.ofSet('tool-executor', set);
  const subjects = createSubjects('bench');
  const { decided } = sampleCall('shell');
  const subject = subjects.journal.event('bench', 'run-1', decided.dispatchId, 'decided');
  const payload = new TextEncoder().encode(JSON.stringify(decided));
  const signed = natsHeaders();
  evaluator.signEvent(subject, 'decided', payload, signed);
  // Quick: rounds of 5,000 (tens of milliseconds each, well above the clock's resolution).
  const n = opts.quick ? 5_000 : 100_000;
  const rounds = 5;
  /** µs per call of `fn`: the median of `rounds` rounds of `count` calls. */
  const perCallUs = (fn: () => void, count: number) => {
    const samples: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      for (let i = 0; i < count; i++) fn();
      samples.push((since(t0) * 1000) / count);
    }
    return median(samples);
  };
  const signCostUs = perCallUs(
    () => evaluator.signEvent(subject, 'decided', payload, natsHeaders()),
    n,
  );
  let refused = 0;
  const verifyCostUs = perCallUs(() => {
    if (executor.verifyEvent(subject, payload, signed) !== null) refused++;
  }, n);
  if (refused) throw new Error('a genuine event failed verification in the bench');
  const ed = generateKeyPairSync('ed25519');
  const signature = sign(null, payload, ed.privateKey);
  const ed25519VerifyUs = perCallUs(
    () => {
      if (!verify(null, payload, ed.publicKey, signature)) refused++;
    },
    opts.quick ? 500 : 5_000,
  );
  if (refused) throw new Error('a genuine Ed25519 signature failed verification in the bench');
  // The request the executor sends the bench's no-op worker, signed as `runRemoteTool` signs it.
  const toolSubject = subjects.remoteTool('bench', 'noop').subject;
  const toolRequest = Buffer.from(
    JSON.stringify({
      dispatchId: decided.dispatchId,
      tenant: 'bench',
      runId: 'run-1',
      toolName: 'noop',
      contractHash: 'c'.repeat(64),
      input: { command: 'git status --porcelain' },
      agent: decided.agent,
      isolation: 'none',
      deadlineMs: 30_000,
    }),
  );
  const toolRequestSignUs = perCallUs(
    () => signToolRequest(executor.toolRequestKey, toolSubject, toolRequest, Date.now()),
    opts.quick ? 500 : 5_000,
  );
  return {
    signCostUs: round(signCostUs, 2),
    verifyCostUs: round(verifyCostUs, 2),
    signReaders: EVENT_SIGNING.decided.readers.length,
    ed25519VerifyUs: round(ed25519VerifyUs, 1),
    toolRequestSignUs: round(toolRequestSignUs, 1),
  };
}
