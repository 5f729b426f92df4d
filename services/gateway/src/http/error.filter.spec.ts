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

  it('maps a body that is too large to 413 invalid-request', () => {
    expect(toHttpError(new PayloadTooLargeException())).toEqual({
      status: 413,
      error: { code: ErrorCode.InvalidRequest, message: 'request body too large' },
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
  ])('maps %s to 500 internal without leaking its message', (_what, thrown) => {
    expect(toHttpError(thrown)).toEqual({
      status: 500,
      error: { code: ErrorCode.Internal, message: 'internal error' },
    });
  });
});
