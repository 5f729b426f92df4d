import {
  compileJsonSchema,
  ErrorCode,
  hasErrorCode,
  InvalidArgumentsError,
  type JsonSchema,
  type JsonSchemaValidator,
} from '@toolgate/contracts';
import type { ToolRegistry } from '@toolgate/registry';
import type { ToolRunOutcome } from '@toolgate/tools';
import { failedOutcome, type FailedOutcome } from './call-executor';
import type { PendingCall } from './pending-call';

/** The registry reads a check needs: the tool as registered now, and any contract by its hash. */
export type ContractSource = Pick<ToolRegistry, 'resolve' | 'contract'>;

/** Validators by contract hash; a contract never changes under its hash, so they never go stale. */
const MAX_VALIDATORS = 4096;

/**
 * Checks a call's input against the contract it was submitted against, before any executor sees
 * it: the input is the one the verdict covered (after hooks, after an approval), and the contract
 * is the one the call's `contractHash` names — the tool's current registration when it still has
 * that hash, else the registry's content-addressed copy, so a re-registration between submit and
 * run never lets a call through on another schema. Fails closed: a contract that cannot be found
 * settles the call as an error, the tool never runs.
 *
 * Builtins (`inprocess`) are checked by `runTool` against their own definition, as before.
 */
export class InputCheck {
  private readonly validators = new Map<string, JsonSchemaValidator>();

  constructor(private readonly registry: () => Promise<ContractSource>) {}

  /** Null when the input may run; otherwise the outcome to settle with instead. */
  async check(call: PendingCall): Promise<ToolRunOutcome | null> {
    if (call.tool.executor === 'inprocess') return null;
    const validator = await this.validator(call);
    if ('ok' in validator) return validator;
    const issues = validator(call.input);
    if (issues.length === 0) return null;
    return { ok: false, error: new InvalidArgumentsError(call.tool.name, issues).toWire() };
  }

  private async validator(call: PendingCall): Promise<JsonSchemaValidator | FailedOutcome> {
    const hash = call.tool.contractHash;
    const cached = this.validators.get(hash);
    if (cached) return cached;
    let parameters: JsonSchema | undefined;
    try {
      const registry = await this.registry();
      const current = registry.resolve(call.tenant, call.tool.name);
      if (current && !current.builtin && current.contractHash === hash) {
        parameters = current.parameters;
      } else {
        const stored = await registry.contract(hash);
        if (stored && stored.name === call.tool.name) parameters = stored.parameters;
      }
    } catch {
      return failedOutcome(
        ErrorCode.Unavailable,
        `the contract of ${call.tool.name} could not be read to check the input`,
      );
    }
    if (!parameters) {
      return failedOutcome(
        ErrorCode.UnknownTool,
        `no contract ${hash} is registered for ${call.tool.name}: the input cannot be checked, so the tool does not run`,
      );
    }
    let validator: JsonSchemaValidator;
    try {
      validator = compileJsonSchema(parameters, `tool ${call.tool.name} parameters`);
    } catch (err) {
      // Registered contracts compiled at registration; one that no longer does is not run.
      return failedOutcome(
        hasErrorCode(err, ErrorCode.Config) ? ErrorCode.Config : ErrorCode.Internal,
        `the contract of ${call.tool.name} does not compile: ${(err as Error).message}`,
      );
    }
    this.validators.set(hash, validator);
    if (this.validators.size > MAX_VALIDATORS) {
      this.validators.delete(this.validators.keys().next().value as string);
    }
    return validator;
  }
}
