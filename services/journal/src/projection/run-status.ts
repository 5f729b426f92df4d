import type { DispatchStatus } from './dispatch-fold';

/**
 * A run's status, derived from its dispatches' statuses (never stored, so it cannot drift):
 * - `settled`: every dispatch is settled;
 * - `suspended`: every dispatch still in flight is parked on an approval;
 * - `running`: anything else (at least one in-flight dispatch is not parked, or the run has events
 *   but no dispatch yet, e.g. only a worktree).
 *
 * A run the journal has nothing of has no status: it is not found (as an unknown dispatch is).
 */
export type RunStatus = 'running' | 'suspended' | 'settled';

export function runStatus(dispatchStatuses: readonly DispatchStatus[]): RunStatus {
  if (dispatchStatuses.length === 0) return 'running';
  const inFlight = dispatchStatuses.filter((s) => s !== 'settled');
  if (inFlight.length === 0) return 'settled';
  return inFlight.every((s) => s === 'suspended') ? 'suspended' : 'running';
}
