import { headers as natsHeaders } from '@nats-io/transport-node';
import { ApiOperation } from '@toolgate/contracts';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * The bus API reads the bearer token from the `Authorization` header whatever its case, as HTTP
 * does: a client library that lower-cases header names (many do) is not locked out.
 */

let stack: TestStack;

beforeAll(async () => {
  stack = await startTestStack('bus-auth-header');
  // The gateway's API subscriptions may reach the broker a moment after the stack is up.
  await eventually(
    () =>
      whoami('Authorization', `Bearer ${TOKENS.acmeAgent}`).then(
        () => true,
        () => undefined,
      ),
    { what: 'the bus API to answer', timeoutMs: 20_000 },
  );
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
