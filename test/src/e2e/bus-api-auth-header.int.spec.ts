import { headers as natsHeaders } from '@nats-io/transport-node';
import { ApiOperation } from '@toolgate/contracts';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * The bus API reads the bearer token from the `Authorization` header whatever its case, as HTTP
 * does: a client library that lower-cases header names (many do) is not locked out. And a subject
 * under `<prefix>.api.` that names no operation is answered with `unknown-operation`, not left to
 * the broker's *no responders*.
 */

let stack: TestStack;

beforeAll(async () => {
  stack = await startTestStack('bus-auth-header');
  // Answered at once: the gateway's API subscriptions reach the broker before it has started.
  expect(await whoami('Authorization', `Bearer ${TOKENS.acmeAgent}`)).toMatchObject({ ok: true });
}, 60_000);

afterAll(async () => {
  await stack?.stop();
});

async function whoami(header: string, value: string): Promise<any> {
  const h = natsHeaders();
  h.set(header, value);
  const reply = await stack.nats.nc.request(stack.nats.subjects.api(ApiOperation.WhoAmI), '{}', {
    headers: h,
    timeout: 10_000,
  });
  return JSON.parse(new TextDecoder().decode(reply.data));
}

it.each(['Authorization', 'authorization', 'AUTHORIZATION'])(
  'takes the token from a %s header',
  async (header) => {
    expect(await whoami(header, `Bearer ${TOKENS.acmeAgent}`)).toMatchObject({
      ok: true,
      data: { tenant: 'acme', identity: 'acme-agent' },
    });
  },
);

it('still refuses a request with no token in any case', async () => {
  expect(await whoami('X-Authorization', `Bearer ${TOKENS.acmeAgent}`)).toMatchObject({
    ok: false,
    error: { code: 'unauthorized' },
  });
});

describe('a subject that names no operation', () => {
  async function ask(operation: string, token: string | undefined = TOKENS.acmeAgent) {
    const h = natsHeaders();
    if (token) h.set('Authorization', `Bearer ${token}`);
    const reply = await stack.nats.nc.request(
      `${stack.nats.subjects.prefix}.api.${operation}`,
      '{}',
      {
        headers: h,
        timeout: 10_000,
      },
    );
    return JSON.parse(new TextDecoder().decode(reply.data));
  }

  it.each([
    ['a typo', 'dispatch.sumbit'],
    ['a prefix of an operation', 'dispatch'],
    ['an operation with a token more', 'dispatch.submit.now'],
    ['a query the journal answers, not the gateway', 'approvals.list.all'],
  ])(
    '%s (%s) is answered unknown-operation, listing the operations there are',
    async (_what, op) => {
      expect(await ask(op)).toEqual({
        ok: false,
        error: {
          code: 'unknown-operation',
          message: expect.stringContaining(JSON.stringify(op)),
          details: { operation: op, operations: Object.values(ApiOperation).sort() },
        },
      });
    },
  );

  it('is answered the same without a token: the list of operations is no secret', async () => {
    expect(await ask('tools.lsit', undefined)).toMatchObject({
      ok: false,
      error: { code: 'unknown-operation', details: { operation: 'tools.lsit' } },
    });
  });

  it('repeats at most 128 characters of what it was asked', async () => {
    const long = `x${'.y'.repeat(200)}`;
    const reply = await ask(long);
    expect(reply.error.code).toBe('unknown-operation');
    expect(reply.error.details.operation).toBe(`${long.slice(0, 128)}…`);
  });

  it('leaves every known operation to its handler (a wrong body is invalid-request, not unknown)', async () => {
    for (const op of Object.values(ApiOperation)) {
      const reply = await ask(op, TOKENS.acmeAdmin);
      expect([op, reply.error?.code]).not.toEqual([op, 'unknown-operation']);
    }
    expect(await ask(ApiOperation.SubmitDispatch)).toMatchObject({
      ok: false,
      error: { code: 'invalid-request' },
    });
  });
});
