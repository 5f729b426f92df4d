import { z } from 'zod';
import { SubjectTokenSchema as Token } from './subjects';

/**
 * A caller gave up on a running call (an MCP client closed its stream): stop it.
 *
 * Published by the gateway on `subjects.cancelDispatch` (core NATS, no reply, at most once),
 * signed as an internal request for the tool-executor (`ServiceKeys.signRequest`), with the tenant
 * of the caller's verified token. Consumed by every tool-executor replica (no queue group): the one
 * running the dispatch aborts it through the call's abort path (a process tree killed, a wait for a
 * remote worker ended), and the call settles `cancelled`. A dispatch that is not running on a
 * replica (not decided yet, parked, settled) is left as it is: cancelling does not withdraw a call.
 */
export const CancelDispatchSchema = z.strictObject({
  tenant: Token,
  runId: Token,
  dispatchId: Token,
  reason: z.string().min(1).max(256),
});
export type CancelDispatch = z.infer<typeof CancelDispatchSchema>;
