import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { headersOf } from '@toolgate/bus';
import {
  CancelDispatchSchema,
  requestSigningOf,
  type ServiceKeys,
  type Subjects,
  type UntrustedReason,
} from '@toolgate/contracts';
import type { ToolRunner } from './tool-runner';

const decoder = new TextDecoder();

/**
 * Hears the gateway's cancellations (`subjects.cancelDispatch`, no queue group: every replica
 * looks for the call among the ones it runs). A message not signed for this service by the
 * gateway, stale or replayed, is nobody's cancellation: another client on the broker cannot stop
 * a call it did not make.
 */
export function listenForCancels(
  nc: NatsConnection,
  subjects: Subjects,
  keys: ServiceKeys,
  runner: Pick<ToolRunner, 'cancel'>,
  onUntrusted?: (reason: UntrustedReason) => void,
): Subscription {
  const subject = subjects.cancelDispatch;
  const { requesters } = requestSigningOf(subjects, subject);
  return nc.subscribe(subject, {
    callback: (err, msg) => {
      if (err) return;
      let check;
      try {
        check = keys.verifyRequest(subject, msg.data, headersOf(msg), requesters);
      } catch {
        return; // The nonce memory is full: refused, as a replay would be.
      }
      if (!check.ok) {
        onUntrusted?.(check.reason);
        return;
      }
      let body: unknown;
      try {
        body = JSON.parse(decoder.decode(msg.data));
      } catch {
        return;
      }
      const parsed = CancelDispatchSchema.safeParse(body);
      if (!parsed.success) return;
      runner.cancel(parsed.data.tenant, parsed.data.dispatchId, parsed.data.reason);
    },
  });
}
