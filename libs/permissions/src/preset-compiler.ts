import { ConfigError } from '@toolgate/contracts';
import {
  PresetNameSchema,
  RiskClassSchema,
  type PermissionRule,
  type PresetName,
  type RiskClass,
} from './policy-document';

type Cell = 'allow' | 'ask' | 'deny';

/** The reference's preset table: declared risk → verdict per preset. */
export const PRESET_TABLE: Readonly<Record<PresetName, Readonly<Record<RiskClass, Cell>>>> = {
  strict: {
    read: 'allow',
    write: 'ask',
    network: 'ask',
    execute: 'ask',
    destructive: 'deny',
    undeclared: 'ask',
  },
  standard: {
    read: 'allow',
    write: 'allow',
    network: 'ask',
    execute: 'ask',
    destructive: 'ask',
    undeclared: 'ask',
  },
  open: {
    read: 'allow',
    write: 'allow',
    network: 'allow',
    execute: 'allow',
    destructive: 'allow',
    undeclared: 'allow',
  },
};

/** The deny and ask rules a preset compiles to. */
export interface CompiledPreset {
  readonly deny: PermissionRule[];
  readonly ask: PermissionRule[];
}

/**
 * Compiles a preset into ordinary deny and ask rules. An "allow" cell emits no rule, so a
 * needsApproval tool still asks under every preset; `open` compiles to empty tables.
 * @throws ConfigError for an unknown preset
 */
export function compilePermissionPreset(preset: PresetName): CompiledPreset {
  const parsed = PresetNameSchema.safeParse(preset);
  if (!parsed.success) {
    throw new ConfigError(`unknown permission preset ${JSON.stringify(preset)}`, {
      details: { preset: String(preset), known: PresetNameSchema.options },
    });
  }
  const row = PRESET_TABLE[parsed.data];
  const byCell = (cell: Cell) => RiskClassSchema.options.filter((r) => row[r] === cell);
  const deny = byCell('deny');
  const ask = byCell('ask');
  return {
    deny: deny.length
      ? [
          {
            id: `preset:${preset}:deny`,
            risk: deny,
            reason: `the ${preset} preset denies ${list(deny)} tools`,
          },
        ]
      : [],
    ask: ask.length
      ? [
          {
            id: `preset:${preset}:ask`,
            risk: ask,
            reason: `the ${preset} preset asks before ${list(ask)} tools`,
          },
        ]
      : [],
  };
}

function list(risks: readonly RiskClass[]): string {
  return risks.length === 1
    ? risks[0]!
    : `${risks.slice(0, -1).join(', ')} and ${risks[risks.length - 1]}`;
}
