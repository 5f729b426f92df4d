/**
 * Builds `POST /v1/dispatches` bodies for one run of a coder agent labelled `label`, waiting up to
 * `wait` ms for the settlement: each call gets the next call id, `extra` adds fields (an
 * isolation, a profile).
 */
export function dispatchRequests(runId: string, label: string, wait: number) {
  const agent = { agentType: 'coder', label };
  let seq = 0;
  return (tool: string, input: unknown, extra: Record<string, unknown> = {}) => ({
    runId,
    callId: `call-${++seq}`,
    agent,
    tool,
    input,
    wait,
    ...extra,
  });
}
