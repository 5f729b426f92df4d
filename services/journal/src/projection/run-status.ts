import type { DispatchStatus } from './dispatch-fold';

/**
 * A run's status, derived from its dispatches' statuses (never stored, so it cannot drift):
 * - `unknown`: the journal has nothing for the run;
 * - `settled`: every dispatch is settled;
 * - `suspended`: every dispatch still in flight is parked on an approval;
 * - `running`: anything else (at least one in-flight dispatch is not parked, or the run has events
 *   but no dispatch yet, e.g. only a worktree).
 */
export type RunStatus = 'running' | 'suspended' | 'settled' | 'unknown';

export function runStatus(
  dispatchStatuses: readonly DispatchStatus[],
  runHasEvents: boolean,
): RunStatus {
  if (dispatchStatuses.length === 0) return runHasEvents ? 'running' : 'unknown';
  const inFlight = dispatchStatuses.filter((s) => s !== 'settled');
  if (inFlight.length === 0) return 'settled';
  return inFlight.every((s) => s === 'suspended') ? 'suspended' : 'running';
}
