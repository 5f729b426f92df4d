import { errors } from '@nats-io/transport-node';
import { JetStreamApiError } from '@nats-io/jetstream';
import { ConfigError, ErrorCode, ToolgateError } from '@toolgate/contracts';
import { z } from 'zod';
import {
  classifyStartupFailure,
  describeFailure,
  startupStep,
  StartupStepError,
} from './startup-failure';

/** A Node system error as the socket layer raises it. */
function systemError(code: string): Error {
  return Object.assign(new Error(`connect ${code} 127.0.0.1:4222`), { code });
}

/** A PostgreSQL error as node-postgres raises it (a plain Error with the SQLSTATE in `code`). */
function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, severity: 'FATAL' });
}

const jsApi = (status: number, errCode: number, description: string) =>
  new JetStreamApiError({ code: status, err_code: errCode, description });

const zodError = (() => {
  const parsed = z.object({ GATEWAY_PORT: z.coerce.number().int() }).safeParse({
    GATEWAY_PORT: 'eighty',
  });
  return parsed.success ? undefined : parsed.error;
})();

describe('classifyStartupFailure', () => {
  it.each<[string, unknown]>([
    [
      'a NATS connection refused (the broker is not up yet)',
      new errors.ConnectionError('connection refused', { cause: systemError('ECONNREFUSED') }),
    ],
    ['a JetStream API request that timed out', new errors.TimeoutError()],
    [
      'no responders for the JetStream API (JetStream still starting)',
      new errors.RequestError('no responders', {
        cause: new errors.NoRespondersError('$JS.API.INFO'),
      }),
    ],
    [
      'a JetStream API 503 (no quorum)',
      jsApi(503, 10008, 'JetStream system temporarily unavailable'),
    ],
    ['a closed connection (the broker went away mid-start)', new errors.ClosedConnectionError()],
    ['PostgreSQL refusing connections', systemError('ECONNREFUSED')],
    ['PostgreSQL starting up (57P03)', pgError('57P03', 'the database system is starting up')],
    [
      'PostgreSQL shutting down (57P01)',
      pgError('57P01', 'terminating connection due to administrator command'),
    ],
    ['PostgreSQL out of connections (53300)', pgError('53300', 'sorry, too many clients already')],
    [
      'a connection terminated mid-query (pg raises a plain Error)',
      new Error('Connection terminated unexpectedly'),
    ],
    ['a broker name that does not resolve yet', systemError('ENOTFOUND')],
    [
      'an unavailable Toolgate error',
      new ToolgateError(ErrorCode.Unavailable, 'worktree root not mounted yet'),
    ],
  ])('%s is transient', (_what, err) => {
    expect(classifyStartupFailure(err)).toBe('transient');
    expect(classifyStartupFailure(new StartupStepError('doing something', err))).toBe('transient');
  });

  it.each<[string, unknown]>([
    ['a ConfigError', new ConfigError('journal schema must be a plain SQL identifier')],
    ['an environment that does not parse', zodError],
    ['wrong NATS credentials', new errors.AuthorizationError('Authorization Violation')],
    [
      'a NATS permission the service lacks',
      new errors.PermissionViolationError(
        'Permissions Violation for Publish to "$KV.toolgate_tools.x"',
        'publish',
        '$KV.toolgate_tools.x',
      ),
    ],
    [
      'a stream configured differently on the broker',
      jsApi(400, 10058, 'stream name already in use with a different configuration'),
    ],
    [
      'a server without TLS when TLS is asked for',
      new errors.ConnectionError("server does not support 'tls'"),
    ],
    [
      'wrong PostgreSQL credentials (28P01)',
      pgError('28P01', 'password authentication failed for user "toolgate"'),
    ],
    [
      'a database that does not exist (3D000)',
      pgError('3D000', 'database "toolgate" does not exist'),
    ],
    ['a missing privilege (42501)', pgError('42501', 'permission denied for schema public')],
    ['a bug', new TypeError("Cannot read properties of undefined (reading 'stop')")],
  ])('%s is permanent', (_what, err) => {
    expect(classifyStartupFailure(err)).toBe('permanent');
    expect(classifyStartupFailure(new StartupStepError('doing something', err))).toBe('permanent');
  });
});

describe('startupStep and describeFailure', () => {
  it('names the step and keeps the failure as the cause', async () => {
    const refused = new errors.ConnectionError('connection refused', {
      cause: systemError('ECONNREFUSED'),
    });
    const failure = await startupStep('connecting to NATS at nats://127.0.0.1:4222', () =>
      Promise.reject(refused),
    ).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(StartupStepError);
    expect((failure as StartupStepError).cause).toBe(refused);
    expect(describeFailure(failure)).toBe(
      'connecting to NATS at nats://127.0.0.1:4222: connection refused (connect ECONNREFUSED 127.0.0.1:4222)',
    );
  });

  it('an inner step keeps its own name when an outer one wraps it', async () => {
    const failure = await startupStep('starting the gateway', () =>
      startupStep('opening the tool registry', () => Promise.reject(new errors.TimeoutError())),
    ).catch((err: unknown) => err);
    expect((failure as StartupStepError).step).toBe('opening the tool registry');
  });

  it('says a step is still running at each notice interval, and nothing once it is done', async () => {
    const lines: string[] = [];
    let finish!: (v: string) => void;
    const step = startupStep(
      'ensuring the journal streams and consumers',
      () => new Promise<string>((resolve) => (finish = resolve)),
      (line) => lines.push(line),
      20,
    );
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    // Two notices, however slowly this machine runs the timers (the test's timeout bounds it).
    while (lines.length < 2) await sleep(10);
    finish('done');
    await expect(step).resolves.toBe('done');
    const said = lines.length;
    expect(lines[0]).toMatch(
      /^start-up: still ensuring the journal streams and consumers after \d+ s$/,
    );
    await sleep(100);
    expect(lines).toHaveLength(said);
  });

  it('says which setting is wrong for an environment that does not parse', () => {
    expect(describeFailure(zodError)).toMatch(/^invalid configuration: .*GATEWAY_PORT/s);
  });
});
