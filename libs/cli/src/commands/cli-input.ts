import { MAX_JOURNAL_PARTITIONS } from '@toolgate/contracts';

/**
 * Bad input on the command line: a flag that does not parse, JSON that does not parse, a missing
 * token. The CLI prints its message and exits 2, distinct from an API error (exit 1).
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** Parses a JSON flag value, naming the flag when it does not parse. */
export function parseJsonFlag(flag: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${flag} is not valid JSON: ${(err as Error).message}`);
  }
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `500ms`, `30s`, `10m`, `2h`, `1d` (or a bare number of milliseconds). */
export function parseDuration(flag: string, text: string): number {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match)
    throw new UsageError(
      `${flag} must be a duration like 30s, 10m, 2h or 1d, got ${JSON.stringify(text)}`,
    );
  return Number(match[1]) * (UNITS[match[2] ?? 'ms'] ?? 1);
}

/** Parses a non-negative integer flag. */
export function parseCount(flag: string, text: string): number {
  if (!/^\d+$/.test(text.trim()))
    throw new UsageError(`${flag} must be a non-negative integer, got ${JSON.stringify(text)}`);
  return Number(text);
}

/**
 * `TOOLGATE_JOURNAL_PARTITIONS` as the services take it (1–64); unset or empty: undefined (the
 * journal's streams say).
 */
export function journalPartitionsFromEnv(text: string | undefined): number | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const count = Number(text.trim());
  if (!/^\d+$/.test(text.trim()) || count < 1 || count > MAX_JOURNAL_PARTITIONS)
    throw new UsageError(
      `TOOLGATE_JOURNAL_PARTITIONS must be an integer from 1 to ${MAX_JOURNAL_PARTITIONS}, got ${JSON.stringify(text)}`,
    );
  return count;
}

/** Approval keys are sha256 hex: checked here so a typo is a usage error, not a round trip. */
export function parseApprovalKey(text: string): string {
  const key = text.trim().toLowerCase();
  if (!/^[0-9a-f]{64}$/.test(key))
    throw new UsageError(
      `approval key must be 64 hex characters (sha256), got ${JSON.stringify(text)}`,
    );
  return key;
}
