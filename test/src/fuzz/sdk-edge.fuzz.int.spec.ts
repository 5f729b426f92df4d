import fc from 'fast-check';
import { ApiOperation, ErrorCode } from '@toolgate/contracts';
import { createClient, type ToolgateClient } from '@toolgate/sdk';
import { tool } from '@toolgate/tools';
import { TOKENS, type TestStack } from '../support/test-stack';
import {
  acceptableCode,
  anyJson,
  bodyFor,
  CASES,
  expectHealthy,
  expectJournalMatches,
  fuzz,
  registeredName,
  RunLedger,
  startFuzzStack,
} from './fuzz-support';

/** Anything a JavaScript caller might pass where the SDK expects a string. */
const loose = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/) },
  { weight: 2, arbitrary: fc.string({ maxLength: 20 }) },
  { weight: 1, arbitrary: anyJson },
);

/** One SDK call with generated arguments. */
const sdkCase = fc.oneof(
  {
    weight: 2,
    arbitrary: bodyFor(ApiOperation.SubmitDispatch).map((request) => ({
      method: 'dispatch' as const,
      request,
    })),
  },
  {
    weight: 1,
    arbitrary: fc
      .record(
        {
          name: fc.oneof(
            { weight: 4, arbitrary: registeredName },
            { weight: 1, arbitrary: anyJson },
          ),
          description: loose,
          parameters: fc.oneof(
            fc.constant({ type: 'object', properties: { q: { type: 'string' } } }),
            anyJson,
          ),
          risk: fc.constantFrom('read', 'write', 'exotic'),
          timeoutMs: fc.integer({ min: -10, max: 5_000_000 }),
        },
        { requiredKeys: ['name', 'description', 'parameters'] },
      )
      .map((definition) => ({
        method: 'registerTool' as const,
        definition: { ...definition, execute: () => null },
      })),
  },
  { weight: 1, arbitrary: loose.map((id) => ({ method: 'getDispatch' as const, id })) },
  { weight: 1, arbitrary: loose.map((id) => ({ method: 'getRun' as const, id })) },
  {
    weight: 1,
    arbitrary: bodyFor(ApiOperation.ListApprovals).map((filter) => ({
      method: 'listApprovals' as const,
      filter,
    })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(loose, bodyFor(ApiOperation.ResolveApproval))
      .map(([key, options]) => ({ method: 'resolveApproval' as const, key, options })),
  },
  { weight: 1, arbitrary: fc.constant({ method: 'listTools' as const }) },
);

type SdkCase = typeof sdkCase extends fc.Arbitrary<infer T> ? T : never;

/**
 * The SDK's inputs under fuzz: 10,000 calls of the client's methods with generated arguments —
 * typed right, typed wrong (as plain JavaScript callers can), hostile — against the real gateway
 * over NATS. Every call must resolve or reject with a typed error (a `code` of the contracts'),
 * never a 5xx code but `unavailable` and never a raw TypeError; a refused dispatch must have
 * journaled nothing; every service must be healthy afterwards.
 */
describe('SDK client fuzz', () => {
  let stack: TestStack;
  let client: ToolgateClient;
  const ledger = new RunLedger('s');

  beforeAll(async () => {
    stack = await startFuzzStack('fuzz-sdk');
    client = await createClient({
      nc: stack.nats.nc,
      prefix: stack.nats.prefix,
      token: TOKENS.acmeAdmin,
      tenant: 'acme',
    });
  }, 60_000);
  afterAll(async () => {
    await client?.close();
    await stack?.stop();
  }, 60_000);

  /** Runs one case: the SDK method it names, with its generated arguments. */
  async function call(c: SdkCase): Promise<unknown> {
    switch (c.method) {
      case 'dispatch':
        return client.dispatch(c.request as never);
      case 'registerTool':
        // A definition the library refuses throws a typed `config` error before anything is sent.
        return client.registerTool(tool(c.definition as never));
      case 'getDispatch':
        return client.getDispatch(c.id as never);
      case 'getRun':
        return client.getRun(c.id as never);
      case 'listApprovals':
        return client.approvals.list(c.filter as never);
      case 'resolveApproval':
        return client.approvals.resolve(c.key as never, c.options as never);
      case 'listTools':
        return client.listTools();
    }
  }

  it('resolves or rejects 10,000 generated calls with typed errors, never a 5xx but unavailable', async () => {
    const ran = await fuzz(sdkCase, async (c) => {
      let runId: string | undefined;
      if (c.method === 'dispatch') {
        const claimed = ledger.claim(c.request);
        runId = claimed.runId;
        c = { ...c, request: claimed.body as Record<string, unknown> };
      }
      let result: unknown;
      try {
        result = await call(c);
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (code === ErrorCode.Unavailable) ledger.unavailable(runId);
        if (!acceptableCode(code)) {
          throw new Error(
            `${c.method} threw ${(err as Error)?.name}: ${String(code)} ${(err as Error)?.message}`,
          );
        }
        return;
      }
      if (c.method === 'dispatch') {
        ledger.accepted(runId);
        // Nothing waits for the outcome; the handle's result is cancelled when the client closes.
        (result as { result: Promise<unknown> }).result.catch(() => undefined);
      }
    });
    expect(ran).toBe(CASES);
  }, 120_000);

  it('journaled exactly the dispatches it accepted, and every service is healthy', async () => {
    await expectJournalMatches(stack, ledger, 50);
    await expectHealthy(stack);
    // The SDK itself still works after all of it.
    await expect(client.listTools()).resolves.toMatchObject({ toolsetHash: expect.any(String) });
  }, 150_000);
});
