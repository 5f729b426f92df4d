import { canonicalDigest } from './canonical-json';

/**
 * A dispatch's id is a content key: the same (tenant, runId, callId, tool name, contract hash,
 * canonical input) always maps to the same id, so a repeated call finds its recorded outcome
 * instead of running again, and a changed contract re-keys. `execute` never enters the key.
 * The id is `d` + the first 40 hex characters of the sha256 (160 bits), a safe subject token.
 */
export function dispatchKey(parts: {
  tenant: string;
  runId: string;
  callId: string;
  toolName: string;
  contractHash: string;
  input: unknown;
}): string {
  const digest = canonicalDigest([
    'toolgate.dispatch.v1',
    parts.tenant,
    parts.runId,
    parts.callId,
    parts.toolName,
    parts.contractHash,
    parts.input,
  ]);
  return `d${digest.slice(0, 40)}`;
}

/** sha256 of the canonical post-hook input: what a verdict (and an approval) is bound to. */
export function inputDigest(input: unknown): string {
  return canonicalDigest(input ?? null);
}

/** The approval key: sha256 of the tool name and the canonical post-hook input. */
export function approvalKey(toolName: string, input: unknown): string {
  return canonicalDigest([toolName, input ?? null]);
}
