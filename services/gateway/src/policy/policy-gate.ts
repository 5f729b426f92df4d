import { EvaluatePolicyRequestSchema, inputDigest } from '@toolgate/contracts';
import { validateStoredPolicy, type PolicyRuntime } from '@toolgate/policy-runtime';
import type { ToolRegistry } from '@toolgate/registry';
import { parseRequest } from '../api/parse-request';
import { resolveToolRef } from '../dispatch/tool-ref';

/**
 * The gateway's policy edge: validates documents before they are stored (a bad rule is refused at
 * put time, never at first dispatch) and dry-runs the chain for a hypothetical call.
 */
export class PolicyGate {
  constructor(
    private readonly runtime: PolicyRuntime,
    private readonly registry: ToolRegistry,
  ) {}

  validate(document: Record<string, unknown>): Record<string, unknown> {
    validateStoredPolicy(document);
    return document;
  }

  async evaluate(tenant: string, body: unknown) {
    const req = parseRequest(EvaluatePolicyRequestSchema, body);
    // What a submission digests, checked the same way: an input JSON cannot carry (a number
    // beyond ±1.8e308) is refused as the submission refuses it, not evaluated as `null`.
    inputDigest(req.input);
    const { decision, revision } = await this.runtime.decide(tenant, {
      tool: await resolveToolRef(this.registry, tenant, req.tool),
      input: req.input,
      agent: req.agent,
      isolation: req.isolation,
      profile: req.profile,
      taint: req.taint,
    });
    return { ...decision, policyRevision: revision };
  }
}
