import {
  ConfigError,
  ErrorCode,
  fromWireError,
  hasErrorCode,
  InvalidArgumentsError,
  isErrorCode,
  isRetryableCode,
  isWireError,
  ModelRetry,
  NonSerializableValueError,
  ToolgateError,
  toWireError,
  type WireError,
} from './errors';

const codes = Object.values(ErrorCode);

/** What a peer process sees: the wire form after JSON serialisation. */
function overTheWire(err: unknown): unknown {
  return JSON.parse(JSON.stringify(toWireError(err))) as unknown;
}

describe('error codes', () => {
  it('are stable, distinct kebab-case strings including the ones the issue names', () => {
    expect(new Set(codes).size).toBe(codes.length);
    for (const code of codes) expect(code).toMatch(/^[a-z]+(-[a-z]+)*$/);
    expect(codes).toEqual(
      expect.arrayContaining([
        'config',
        'unknown-tool',
        'invalid-arguments',
        'model-retry',
        'non-serializable-result',
        'executor-unregistered',
        'denied',
        'timeout',
        'already-resolved',
        'internal',
      ]),
    );
    expect(isErrorCode('timeout')).toBe(true);
    expect(isErrorCode('Timeout')).toBe(false);
    expect(isErrorCode(undefined)).toBe(false);
  });
});

describe('wire round trip', () => {
  it.each(codes)('%s survives toWireError → JSON → fromWireError', (code) => {
    const details = { tool: 'search_issues', nested: { n: 1, list: ['a'] } };
    const original = new ToolgateError(code, `something about ${code}`, {
      details,
      cause: new Error('secret host detail'),
    });
    const wire = overTheWire(original);
    expect(wire).toEqual({ code, message: `something about ${code}`, details });
    expect(JSON.stringify(wire)).not.toContain('secret host detail');

    const back = fromWireError(wire);
    expect(back).toBeInstanceOf(ToolgateError);
    expect(back.code).toBe(code);
    expect(back.message).toBe(`something about ${code}`);
    expect(back.details).toEqual(details);
    expect(back.retryable).toBe(original.retryable);
    expect(toWireError(back)).toEqual(wire);
    expect(hasErrorCode(back, code)).toBe(true);
  });

  it.each(codes)('%s without details has no details key on the wire', (code) => {
    const wire = overTheWire(new ToolgateError(code, 'm'));
    expect(wire).toEqual({ code, message: 'm' });
    expect(Object.keys(wire as object)).toEqual(['code', 'message']);
    expect(fromWireError(wire).details).toBeUndefined();
  });

  it('rebuilds a ConfigError as a ConfigError', () => {
    const back = fromWireError(overTheWire(new ConfigError('bad tool', { details: { a: 1 } })));
    expect(back).toBeInstanceOf(ConfigError);
    expect(back.name).toBe('ConfigError');
  });

  it('serialises through JSON.stringify as the wire form', () => {
    const err = new ConfigError('bad', { details: { x: 1 }, cause: new Error('hidden') });
    expect(JSON.parse(JSON.stringify(err))).toEqual({
      code: 'config',
      message: 'bad',
      details: { x: 1 },
    });
  });

  it('passes a wire error received from a peer through unchanged', () => {
    const wire: WireError = { code: 'denied', message: 'denied by rule', details: { rule: 'r1' } };
    expect(toWireError(wire)).toEqual(wire);
    expect(toWireError({ code: 'denied', message: 'm' })).toEqual({ code: 'denied', message: 'm' });
  });

  it('marks only transient failures retryable, unless told otherwise', () => {
    const retryable = codes.filter((c) => new ToolgateError(c, 'm').retryable);
    expect(retryable.sort()).toEqual(['timeout', 'unavailable']);
    expect(codes.filter(isRetryableCode).sort()).toEqual(['timeout', 'unavailable']);
    expect(new ToolgateError('internal', 'm', { retryable: true }).retryable).toBe(true);
    expect(new ToolgateError('timeout', 'm', { retryable: false }).retryable).toBe(false);
  });
});

describe('unknown errors', () => {
  it.each<[string, unknown]>([
    ['an Error', new Error('connect ECONNREFUSED 10.0.0.7:5432 password=hunter2')],
    ['a TypeError', new TypeError('Cannot read properties of undefined (reading hunter2)')],
    ['a string', 'hunter2'],
    ['a number', 42],
    ['null', null],
    ['undefined', undefined],
    ['an object with an unknown code', { code: 'ECONNREFUSED', message: 'hunter2' }],
    ['an object with a known code but no message', { code: 'denied' }],
    [
      'an object whose details are not an object',
      { code: 'denied', message: 'hunter2', details: 'x' },
    ],
  ])('%s becomes internal without leaking anything', (_what, thrown) => {
    const wire = toWireError(thrown);
    expect(wire).toEqual({ code: 'internal', message: 'internal error' });
    expect(JSON.stringify(wire)).not.toContain('hunter2');
  });

  it('a malformed wire error becomes internal when read', () => {
    for (const garbage of [null, 'x', { code: 'nope', message: 'm' }, { message: 'm' }, []]) {
      const err = fromWireError(garbage);
      expect(err.code).toBe('internal');
      expect(err.message).toBe('malformed error on the wire');
    }
    expect(isWireError({ code: 'timeout', message: 'm', details: null })).toBe(false);
    expect(isWireError({ code: 'timeout', message: 'm', details: {} })).toBe(true);
  });
});

describe('hasErrorCode', () => {
  it('checks by code, across process boundaries and without instanceof', () => {
    expect(hasErrorCode(new ConfigError('x'), ErrorCode.Config)).toBe(true);
    expect(hasErrorCode(new ConfigError('x'), ErrorCode.Internal)).toBe(false);
    expect(hasErrorCode({ code: 'timeout', message: 'm' }, ErrorCode.Timeout)).toBe(true);
    expect(hasErrorCode(JSON.parse('{"code":"denied"}'), ErrorCode.Denied)).toBe(true);
    for (const other of [null, undefined, 'timeout', 1, {}, new Error('timeout')]) {
      expect(hasErrorCode(other, ErrorCode.Timeout)).toBe(false);
    }
  });
});

describe('typed errors', () => {
  it('InvalidArgumentsError names the tool and every issue, summarised after five', () => {
    const issues = Array.from({ length: 7 }, (_, i) => ({
      path: i === 0 ? [] : ['args', i],
      message: `problem ${i}`,
    }));
    const err = new InvalidArgumentsError('search_issues', issues);
    expect(err.code).toBe('invalid-arguments');
    expect(err.details).toEqual({ tool: 'search_issues', issues });
    expect(err.message).toBe(
      'invalid arguments for search_issues: (root): problem 0; args.1: problem 1; ' +
        'args.2: problem 2; args.3: problem 3; args.4: problem 4 (+2 more)',
    );
    expect(fromWireError(overTheWire(err)).details).toEqual({ tool: 'search_issues', issues });
  });

  it('ModelRetry and NonSerializableValueError carry their codes', () => {
    expect(new ModelRetry('use plain keywords').toWire()).toEqual({
      code: 'model-retry',
      message: 'use plain keywords',
    });
    expect(new NonSerializableValueError('bigint at $.n', { path: '$.n' }).toWire()).toEqual({
      code: 'non-serializable-result',
      message: 'bigint at $.n',
      details: { path: '$.n' },
    });
    const err = new ConfigError('x');
    expect(err).toBeInstanceOf(Error);
    expect(err.retryable).toBe(false);
  });
});
