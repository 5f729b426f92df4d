import { randomBytes } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import type { ToolContext } from '@toolgate/contracts';
import type { PendingCall } from './pending-call';

/** Where a tool's log lines go besides its span: the service's logger. */
export type ServiceLog = (level: string, message: string, data?: Record<string, unknown>) => void;

/**
 * The context a builtin or a script runs a call in: the call's ids, agent, directory and
 * isolation, and a `log` that adds an event to the active span and passes the line on to the
 * service's logger tagged with the dispatch.
 */
export function toolContext(
  call: PendingCall,
  cwd: string,
  log: ServiceLog | undefined,
  signal?: AbortSignal,
): Omit<ToolContext, 'signal'> & { signal?: AbortSignal } {
  const spanId = trace.getActiveSpan()?.spanContext().spanId ?? randomBytes(8).toString('hex');
  return {
    runId: call.runId,
    dispatchId: call.dispatchId,
    spanId,
    agent: call.agent,
    cwd,
    isolation: call.isolation,
    log(level, message, data) {
      trace.getActiveSpan()?.addEvent('tool.log', { level, message });
      log?.(level, message, { dispatchId: call.dispatchId, ...data });
    },
    ...(signal ? { signal } : {}),
  };
}
