import { ErrorCode } from '@toolgate/contracts';
import { HTTP_STATUS_BY_CODE } from './error-status';

describe('HTTP_STATUS_BY_CODE', () => {
  it('has a status for every ErrorCode and nothing else', () => {
    expect(Object.keys(HTTP_STATUS_BY_CODE).sort()).toEqual(Object.values(ErrorCode).sort());
  });

  it.each<[ErrorCode, number]>([
    [ErrorCode.Config, 422],
    [ErrorCode.InvalidRequest, 400],
    [ErrorCode.TooLarge, 413],
    [ErrorCode.UnknownTool, 404],
    [ErrorCode.InvalidArguments, 422],
    [ErrorCode.ModelRetry, 422],
    [ErrorCode.NonSerializableResult, 422],
    [ErrorCode.ExecutorUnregistered, 422],
    [ErrorCode.Denied, 403],
    [ErrorCode.Timeout, 504],
    [ErrorCode.AlreadyResolved, 409],
    [ErrorCode.ApprovalMismatch, 409],
    [ErrorCode.Cancelled, 409],
    [ErrorCode.ToolFailed, 500],
    [ErrorCode.PathOutsideScope, 403],
    [ErrorCode.PoisonMessage, 500],
    [ErrorCode.Unauthorized, 401],
    [ErrorCode.Forbidden, 403],
    [ErrorCode.UnknownOperation, 404],
    [ErrorCode.NotFound, 404],
    [ErrorCode.Conflict, 409],
    [ErrorCode.Unavailable, 503],
    [ErrorCode.Internal, 500],
  ])('%s → %i', (code, status) => {
    expect(HTTP_STATUS_BY_CODE[code]).toBe(status);
  });

  it('maps every code to an error status (4xx or 5xx)', () => {
    for (const status of Object.values(HTTP_STATUS_BY_CODE)) {
      expect(status).toBeGreaterThanOrEqual(400);
      expect(status).toBeLessThan(600);
    }
  });
});
