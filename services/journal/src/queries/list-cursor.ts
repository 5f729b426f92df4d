import { ErrorCode, ToolgateError } from '@toolgate/contracts';

/** The sort key of a row without its instant: after every real one (microseconds since 1970). */
export const SORT_KEY_LAST = '9223372036854775807';
/** ... and before every real one, for an order that runs backwards. */
export const SORT_KEY_FIRST = '-9223372036854775808';

/**
 * A keyset cursor: the order it continues, the last row's sort key (microseconds since the epoch,
 * as text) and its id, base64url-encoded. It holds no tenant and no filter: a page is always read
 * with the caller's tenant and filters, the cursor only says where the previous page stopped.
 */
export function encodeCursor(order: string, key: string, id: string): string {
  return Buffer.from(JSON.stringify([order, String(key), id])).toString('base64url');
}

/** The position a cursor names, or `invalid-request` when it is not one of this order's. */
export function decodeCursor(cursor: string, order: string): { key: string; id: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 3 ||
    parsed[0] !== order ||
    typeof parsed[1] !== 'string' ||
    !/^-?\d{1,19}$/.test(parsed[1]) ||
    typeof parsed[2] !== 'string' ||
    parsed[2].length > 256
  )
    throw invalid();
  return { key: parsed[1], id: parsed[2] };
}

function invalid(): ToolgateError {
  return new ToolgateError(ErrorCode.InvalidRequest, 'the cursor does not continue this list');
}
