import { ErrorCode } from '@toolgate/contracts';

/**
 * The one mapping from error codes to HTTP statuses (a tested table). Codes that describe a tool
 * outcome (invalid-arguments, model-retry, ...) only reach HTTP inside a settled result, with 200;
 * here they appear when an edge refuses a request for that reason.
 */
export const HTTP_STATUS_BY_CODE: Readonly<Record<ErrorCode, number>> = {
  [ErrorCode.Config]: 422,
  [ErrorCode.InvalidRequest]: 400,
  [ErrorCode.TooLarge]: 413,
  [ErrorCode.UnknownTool]: 404,
  [ErrorCode.InvalidArguments]: 422,
  [ErrorCode.ModelRetry]: 422,
  [ErrorCode.NonSerializableResult]: 422,
  [ErrorCode.ExecutorUnregistered]: 422,
  [ErrorCode.Denied]: 403,
  [ErrorCode.Timeout]: 504,
  [ErrorCode.AlreadyResolved]: 409,
  [ErrorCode.ApprovalMismatch]: 409,
  [ErrorCode.ContractDrift]: 409,
  [ErrorCode.Cancelled]: 409,
  [ErrorCode.ToolFailed]: 500,
  [ErrorCode.PathOutsideScope]: 403,
  [ErrorCode.PoisonMessage]: 500,
  [ErrorCode.ErrorCap]: 429,
  [ErrorCode.Unauthorized]: 401,
  [ErrorCode.Forbidden]: 403,
  [ErrorCode.UnknownOperation]: 404,
  [ErrorCode.NotFound]: 404,
  [ErrorCode.Conflict]: 409,
  [ErrorCode.Unavailable]: 503,
  [ErrorCode.Internal]: 500,
};
