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

/**
 * The status and body for any thrown value: its wire error, and the status the one table
 * (`error-status.ts`) gives its code.
 */
export function toHttpError(exception: unknown): { status: number; error: WireError } {
  const error = wireErrorOf(exception);
  return { status: HTTP_STATUS_BY_CODE[error.code], error };
}

function wireErrorOf(exception: unknown): WireError {
  if (exception instanceof ToolgateError) return exception.toWire();
  const parsing = bodyParserError(exception);
  if (parsing) return parsing;
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    if (status === 404) return { code: ErrorCode.NotFound, message: 'no such route' };
    if (status === 413) return { code: ErrorCode.TooLarge, message: 'request body too large' };
    if (status >= 400 && status < 500) {
      return (
        undecodablePath(exception.message) ?? {
          code: ErrorCode.InvalidRequest,
          message: 'malformed request body (expected JSON)',
        }
      );
    }
  }
  const refused = frameworkRefusal(exception);
  if (refused) return refused;
  return toWireError(exception);
}

/**
 * A client error express raised before any route ran, without body-parser's `type`: a body whose
 * `Content-Encoding` does not decode (body-parser passes zlib's or brotli's error on as a 400), a
 * path whose percent-encoding does not (the router's "Failed to decode param"). Both are the
 * request's fault — `invalid-request`, saying which — never `internal`.
 */
function frameworkRefusal(exception: unknown): WireError | undefined {
  if (!(exception instanceof Error)) return undefined;
  const { status, expose, code } = exception as {
    status?: unknown;
    expose?: unknown;
    code?: unknown;
  };
  if (typeof status !== 'number' || status < 400 || status >= 500 || expose !== true)
    return undefined;
  const path = undecodablePath(exception.message);
  if (path) return path;
  if (typeof code === 'string' && /^(Z_|ERR_)/.test(code))
    return {
      code: ErrorCode.InvalidRequest,
      message: 'malformed request body: it does not decode as its Content-Encoding says',
    };
  return { code: ErrorCode.InvalidRequest, message: 'malformed request' };
}

/** The router's refusal of a path parameter whose percent-encoding does not decode (`%ff`). */
function undecodablePath(message: string): WireError | undefined {
  return message.startsWith('Failed to decode param')
    ? { code: ErrorCode.InvalidRequest, message: 'malformed path: a bad percent-encoding' }
    : undefined;
}

/**
 * An error of the JSON body parser (express's body-parser, before any route runs): it carries a
 * `type` and a 4xx `status`. A body over the limit (100 KB, express's default) is `too-large`;
 * any other refusal of the body (not JSON, an unsupported charset or encoding, an aborted upload)
 * is `invalid-request`. Its 5xx kinds are our bugs and stay `internal`.
 */
function bodyParserError(exception: unknown): WireError | undefined {
  if (typeof exception !== 'object' || exception === null) return undefined;
  const { type, status, limit, length } = exception as {
    type?: unknown;
    status?: unknown;
    limit?: unknown;
    length?: unknown;
  };
  if (typeof type !== 'string' || typeof status !== 'number' || status < 400 || status >= 500)
    return undefined;
  if (type === 'entity.too.large' || type === 'parameters.too.many') {
    return {
      code: ErrorCode.TooLarge,
      message:
        typeof limit === 'number'
          ? `request body too large: the limit is ${limit} bytes`
          : 'request body too large',
      details: {
        ...(typeof limit === 'number' ? { limitBytes: limit } : {}),
        ...(typeof length === 'number' ? { bytes: length } : {}),
      },
    };
  }
  return { code: ErrorCode.InvalidRequest, message: 'malformed request body (expected JSON)' };
}
