import { declaredHost, ErrorCode } from '@toolgate/contracts';
import { failedOutcome, type FailedOutcome } from '../execution/call-executor';
import type { PendingCall } from '../execution/pending-call';

/** Whether a call may reach `host`: the domain rules of its tenant and profile. */
export type CheckCallDomain = (
  call: PendingCall,
  host: string,
) => Promise<'allow' | 'deny'> | 'allow' | 'deny';

/**
 * Network for a subprocess or container call: only for risk `network` (what the chain decided
 * on) and only when every host the tool declares passes the call's domain rules (a throw is a
 * deny). Returns whether to give the network, or the `denied` outcome when the rules refuse a
 * declared host — the call then settles before anything runs.
 */
export async function callNetwork(
  call: PendingCall,
  hosts: readonly string[] | undefined,
  checkDomain: CheckCallDomain,
): Promise<boolean | FailedOutcome> {
  if (!hosts?.length || call.tool.risk !== 'network') return false;
  // The rules name hosts, not ports: each declared name once.
  const names = new Set(hosts.map((entry) => declaredHost(entry)?.host ?? entry));
  for (const host of names) {
    let verdict: 'allow' | 'deny';
    try {
      verdict = await checkDomain(call, host);
    } catch {
      verdict = 'deny';
    }
    if (verdict !== 'allow') {
      return failedOutcome(
        ErrorCode.Denied,
        `${call.tool.name} needs ${host}, which the domain rules refuse`,
        { host },
      );
    }
  }
  return true;
}
