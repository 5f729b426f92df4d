import {
  BadRequestException,
  HttpException,
  NotFoundException,
  PayloadTooLargeException,
} from '@nestjs/common';
import { ConfigError, ErrorCode, ToolgateError } from '@toolgate/contracts';
import { toHttpError } from './error.filter';

describe('toHttpError', () => {
  it('maps a ToolgateError by its code and keeps its wire form', () => {
    const err = new ToolgateError(ErrorCode.AlreadyResolved, 'already resolved: allow', {
      details: { by: 'user:bob' },
    });
    expect(toHttpError(err)).toEqual({
      status: 409,
      error: {
        code: ErrorCode.AlreadyResolved,
        message: 'already resolved: allow',
        details: { by: 'user:bob' },
      },
    });
  });

  it('maps a ConfigError to 422', () => {
    expect(toHttpError(new ConfigError('bad policy'))).toEqual({
      status: 422,
      error: { code: 'config', message: 'bad policy' },
    });
  });

  it('maps a wire error that crossed a process by its code', () => {
    expect(toHttpError({ code: ErrorCode.Unavailable, message: 'no executor' })).toEqual({
      status: 503,
      error: { code: ErrorCode.Unavailable, message: 'no executor' },
    });
  });

  it('maps an unknown route to not-found', () => {
    expect(toHttpError(new NotFoundException())).toEqual({
      status: 404,
      error: { code: ErrorCode.NotFound, message: 'no such route' },
    });
  });

  it('maps a body that is too large to 413 too-large', () => {
    expect(toHttpError(new PayloadTooLargeException())).toEqual({
      status: 413,
      error: { code: ErrorCode.TooLarge, message: 'request body too large' },
    });
  });

  // What express's body-parser throws before a route runs (its `http-errors` shape).
  const parserError = (type: string, status: number, extra: object = {}) =>
    Object.assign(new Error('raw parser message'), { type, status, expose: true, ...extra });

  it('maps the body parser refusing a body over its limit to 413 too-large, naming the limit', () => {
    expect(
      toHttpError(parserError('entity.too.large', 413, { limit: 102400, length: 200_123 })),
    ).toEqual({
      status: 413,
      error: {
        code: ErrorCode.TooLarge,
        message: 'request body too large: the limit is 102400 bytes',
        details: { limitBytes: 102400, bytes: 200_123 },
      },
    });
  });

  it.each([
    ['entity.parse.failed', 400],
    ['encoding.unsupported', 415],
    ['charset.unsupported', 415],
    ['request.aborted', 400],
    ['request.size.invalid', 400],
  ])('maps the body parser refusing a body (%s) to 400 invalid-request', (type, status) => {
    expect(toHttpError(parserError(type, status))).toEqual({
      status: 400,
      error: { code: ErrorCode.InvalidRequest, message: 'malformed request body (expected JSON)' },
    });
  });

  it('maps any other 4xx from the framework (a JSON parse failure) to 400 invalid-request', () => {
    expect(toHttpError(new BadRequestException('Unexpected token } in JSON'))).toEqual({
      status: 400,
      error: { code: ErrorCode.InvalidRequest, message: 'malformed request body (expected JSON)' },
    });
  });

  it.each([
    ['a plain Error', new Error('ECONNREFUSED 10.0.0.5:5432 password=hunter2')],
    ['a framework 5xx', new HttpException('boom', 502)],
    ['a thrown string', 'oops'],
    ['an object with an unknown code', { code: 'weird', message: 'x' }],
    [
      'a body-parser 5xx (our bug)',
      Object.assign(new Error('x'), { type: 'stream.encoding.set', status: 500 }),
    ],
  ])('maps %s to 500 internal without leaking its message', (_what, thrown) => {
    expect(toHttpError(thrown)).toEqual({
      status: 500,
      error: { code: ErrorCode.Internal, message: 'internal error' },
    });
  });
});
