import { ErrorCode, hasErrorCode } from '@toolgate/contracts';

/** Whether `fn` throws an error carrying the `config` code (a refused policy or pattern). */
export function configError(fn: () => unknown): boolean {
  try {
    fn();
  } catch (err) {
    return hasErrorCode(err, ErrorCode.Config);
  }
  return false;
}
