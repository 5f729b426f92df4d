import { ConfigError, ErrorCode, hasErrorCode } from '../../src/errors';

/**
 * Test support: runs `fn` and returns the {@link ConfigError} it throws, failing the test unless it
 * throws one that also carries the `config` code. Not exported from the package.
 */
export function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect(hasErrorCode(err, ErrorCode.Config)).toBe(true);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}
