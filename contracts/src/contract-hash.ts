import { canonicalDigest } from './canonical-json';
import { ConfigError } from './errors';
import { TOOL_NAME_PATTERN, type ToolContract } from './tool-contract';

/** The identity tuple of a contract, exactly the fields that are hashed. */
type ContractTuple = [name: string, description: string, parameters: unknown, version?: string];

function tupleOf(contract: ToolContract): ContractTuple {
  if (!TOOL_NAME_PATTERN.test(contract.name)) {
    throw new ConfigError(`illegal tool name ${JSON.stringify(contract.name)}`);
  }
  // An absent version is absent from the tuple: a 3-tuple never equals a 4-tuple, so no
  // version hashes differently from every present version, including "".
  return contract.version === undefined
    ? [contract.name, contract.description, contract.parameters]
    : [contract.name, contract.description, contract.parameters, contract.version];
}

/** sha256 (lowercase hex) over the canonical JSON of one contract's identity tuple. */
export function contractHash(contract: ToolContract): string {
  return canonicalDigest(tupleOf(contract));
}

/**
 * sha256 (lowercase hex) over the canonical JSON array of identity tuples sorted by name.
 * Policy fields and implementations are not looked at. Two tools with one name are a ConfigError.
 */
export function toolsetHash(contracts: readonly ToolContract[]): string {
  assertUniqueToolNames(contracts);
  const tuples = [...contracts]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map(tupleOf);
  return canonicalDigest(tuples);
}

/** Throws {@link ConfigError} naming every duplicated tool name. */
export function assertUniqueToolNames(contracts: readonly { name: string }[]): void {
  const seen = new Set<string>();
  const dupes = new Set<string>();
  for (const { name } of contracts) (seen.has(name) ? dupes : seen).add(name);
  if (dupes.size) {
    throw new ConfigError(`duplicate tool names in one toolset: ${[...dupes].join(', ')}`, {
      details: { duplicates: [...dupes] },
    });
  }
}
