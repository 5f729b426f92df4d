import type { Risk } from '@toolgate/contracts';
import { matchHost } from './domain-match';
import { RISK_BIT, type PermissionChain } from './permission-chain';
import { FETCH_TOOL_NAME, type MatchedRule } from './permission-types';

/** Whether the fetch tool may connect to a host, and the rule that says no. */
export type FetchHostVerdict =
  { verdict: 'allow' } | { verdict: 'deny'; rule: MatchedRule; reason: string };

/**
 * The connect-time half of domain rules: called by the first-party fetch tool before every
 * connection (redirect hops included) with the normalised host. A deny or ask domain rule that
 * applies to the fetch tool refuses the connection — an ask cannot be put to a person mid-request,
 * so it fails closed. The chain's other layers already decided the call itself.
 */
export function checkFetchHost(
  chain: PermissionChain,
  host: string,
  declaredRisk: Risk | undefined = 'network',
): FetchHostVerdict {
  const risk = chain.riskOverrides.get(FETCH_TOOL_NAME) ?? declaredRisk;
  const bit = RISK_BIT[risk ?? 'undeclared'];
  for (const { rule } of chain.domainRules) {
    if (rule.tools !== undefined && !rule.tools.has(FETCH_TOOL_NAME)) continue;
    if (rule.riskMask !== 0 && (rule.riskMask & bit) === 0) continue;
    if (rule.hosts !== undefined && matchHost(rule.hosts, host)) {
      return { verdict: 'deny', rule: rule.description, reason: rule.reason };
    }
  }
  return { verdict: 'allow' };
}
