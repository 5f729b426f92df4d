import type { Risk } from '@toolgate/contracts';
import { canonicalHost } from './canonical-host';
import { matchHost } from './domain-match';
import { RISK_BIT, type PermissionChain } from './permission-chain';
import { FETCH_TOOL_NAME, type MatchedRule } from './permission-types';

/** Whether the fetch tool may connect to a host, and the rule that says no. */
export type FetchHostVerdict =
  { verdict: 'allow' } | { verdict: 'deny'; rule: MatchedRule; reason: string };

/**
 * The connect-time half of domain rules: called by the first-party fetch tool before every
 * connection (redirect hops included) with the host name, and again with every address that name
 * resolved to (the address actually connected to); and for a networked subprocess tool with each
 * host it declares (`toolName` is then that tool). Any spelling is put in {@link canonicalHost}
 * form first, so `[::ffff:7f00:1]` meets a rule about `127.0.0.1`; text that is not a host denies.
 * A deny or ask domain rule that applies to the tool refuses the connection — an ask cannot be put
 * to a person mid-request, so it fails closed. The chain's other layers already decided the call
 * itself.
 */
export function checkFetchHost(
  chain: PermissionChain,
  host: string,
  declaredRisk: Risk | undefined = 'network',
  toolName: string = FETCH_TOOL_NAME,
): FetchHostVerdict {
  const canonical = canonicalHost(host);
  if (canonical === undefined) {
    return {
      verdict: 'deny',
      rule: { source: 'fetch-host-check', kind: 'host' },
      reason: `${JSON.stringify(host)} is not a host name or address`,
    };
  }
  const risk = chain.riskOverrides.get(toolName) ?? declaredRisk;
  const bit = RISK_BIT[risk ?? 'undeclared'];
  for (const { rule } of chain.domainRules) {
    if (rule.tools !== undefined && !rule.tools.has(toolName)) continue;
    if (rule.riskMask !== 0 && (rule.riskMask & bit) === 0) continue;
    if (rule.hosts !== undefined && matchHost(rule.hosts, canonical)) {
      return { verdict: 'deny', rule: rule.description, reason: rule.reason };
    }
  }
  return { verdict: 'allow' };
}
