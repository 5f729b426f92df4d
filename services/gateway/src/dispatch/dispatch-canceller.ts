import type { NatsConnection } from '@nats-io/transport-node';
import { leanHeaders } from '@toolgate/bus';
import {
  CancelDispatchSchema,
  requestSigningOf,
  type CancelDispatch,
  type ServiceKeys,
  type Subjects,
} from '@toolgate/contracts';
import { injectTraceContext } from '@toolgate/telemetry';

const encoder = new TextEncoder();

/**
 * Tells the tool-executors that a caller gave up on a dispatch (see `cancel-dispatch.ts`): signed
 * for the executor, fire-and-forget. The tenant is the caller's verified one, never a body's.
 */
export class DispatchCanceller {
  constructor(
    private readonly nc: NatsConnection,
    private readonly subjects: Subjects,
    private readonly keys: ServiceKeys,
  ) {}

  cancel(request: CancelDispatch): void {
    const subject = this.subjects.cancelDispatch;
    const payload = encoder.encode(JSON.stringify(CancelDispatchSchema.parse(request)));
    const headers = leanHeaders();
    this.keys.signRequest(
      subject,
      requestSigningOf(this.subjects, subject).responder,
      payload,
      headers,
    );
    try {
      this.nc.publish(subject, payload, { headers: injectTraceContext(headers) });
    } catch {
      // A closed connection: the call runs to its deadline, as it would have without a cancel.
    }
  }
}
