import type {
  AgentRef,
  DecidedBy,
  Isolation,
  ListApprovalsRequest,
  ToolRef,
} from '@toolgate/contracts';

/**
 * An approval as the gateway lists it (the journal's fold of a dispatch's `suspended` and
 * `resolved` events). Fields the journal has not folded yet are null.
 */
export interface ApprovalView {
  tenant: string;
  runId: string;
  dispatchId: string;
  approvalKey: string;
  inputDigest: string;
  policyRevision: number;
  status: 'pending' | 'resolved';
  toolName: string | null;
  tool: ToolRef | null;
  input: unknown;
  agent: AgentRef | null;
  isolation: Isolation | null;
  profile: string | null;
  decidedBy: DecidedBy | null;
  rule: unknown;
  submittedBy: string | null;
  onTimeout: 'allow' | 'deny' | null;
  suspendedAt: string | null;
  expiresAt: string | null;
  decision: 'allow' | 'deny' | null;
  reason: string | null;
  resolvedBy: string | null;
  source: 'human' | 'timeout' | 'policy' | null;
  resolvedAt: string | null;
}

/** Filters of `client.approvals.list()` (the tenant always comes from the token). */
export type ApprovalFilter = ListApprovalsRequest;
