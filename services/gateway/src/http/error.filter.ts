import { Catch, HttpException, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import type { Response } from 'express';
import { ErrorCode, ToolgateError, toWireError, type WireError } from '@toolgate/contracts';
import { HTTP_STATUS_BY_CODE } from '../api/error-status';

/** Maps every error once, at the HTTP boundary: `{ error: { code, message, details } }`. */
@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const { status, error } = toHttpError(exception);
    res.status(status).json({ error });
  }
}

/** The status and body for any thrown value (a tested table lives in error-status.ts). */
export function toHttpError(exception: unknown): { status: number; error: WireError } {
  if (exception instanceof ToolgateError) {
    return { status: HTTP_STATUS_BY_CODE[exception.code], error: exception.toWire() };
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    if (status === 404)
      return { status, error: { code: ErrorCode.NotFound, message: 'no such route' } };
    if (status === 413)
      return {
        status,
        error: { code: ErrorCode.InvalidRequest, message: 'request body too large' },
      };
    if (status >= 400 && status < 500) {
      return {
        status: 400,
        error: {
          code: ErrorCode.InvalidRequest,
          message: 'malformed request body (expected JSON)',
        },
      };
    }
  }
  const wire = toWireError(exception);
  return { status: HTTP_STATUS_BY_CODE[wire.code], error: wire };
}
