import fc from 'fast-check';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { ApiOperation, ErrorCode } from '@toolgate/contracts';
import { TOKENS, type TestStack } from '../support/test-stack';
import {
  acceptableCode,
  authorization,
  bodyFor,
  CASES,
  expectHealthy,
  expectJournalMatches,
  fuzz,
  RunLedger,
  startFuzzStack,
} from './fuzz-support';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A payload as it may arrive on `<prefix>.api.<op>`: JSON of a body, or bytes that are not JSON. */
const busCase = fc.constantFrom(...Object.values(ApiOperation)).chain((operation) =>
  fc.record({
    operation: fc.constant(operation),
    authorization,
    payload: fc.oneof(
      { weight: 8, arbitrary: bodyFor(operation).map((body) => ({ json: body })) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => ({ bytes })) },
      {
        weight: 1,
        arbitrary: fc.constantFrom('', '{', 'null', '[]', '"x"', '{"a":1}garbage', '\u0000'),
      },
    ),
    header: fc.option(
      fc.tuple(
        fc.constantFrom('X-Odd', 'Nats-Msg-Id', 'traceparent'),
        fc.string({ minLength: 1, maxLength: 30 }),
      ),
      { nil: undefined },
    ),
  }),
);

/**
 * The bus API edge under fuzz: 10,000 generated requests over real NATS request/reply to the
 * gateway's `<prefix>.api.<operation>` subjects, with and without tokens, JSON bodies good, bad
 * and hostile, and payloads that are not JSON at all; then requests at the broker's `max_payload`.
 * Every reply must be the envelope with a typed error, never a 5xx code but `unavailable`; what was
 * refused must have journaled nothing; every service must be healthy afterwards.
 */
describe('bus API edge fuzz', () => {
  let stack: TestStack;
  const ledger = new RunLedger('b');

  beforeAll(async () => {
    stack = await startFuzzStack('fuzz-bus');
  }, 60_000);
  afterAll(() => stack?.stop(), 60_000);

  async function request(
    operation: ApiOperation,
    auth: string | undefined,
    data: Uint8Array,
    header?: [string, string],
  ): Promise<{ ok: boolean; code?: unknown }> {
    const h = natsHeaders();
    if (auth !== undefined) h.set('Authorization', auth);
    if (header) h.set(header[0], header[1]);
    const reply = await stack.nats.nc.request(stack.nats.subjects.api(operation), data, {
      timeout: 20_000,
      headers: h,
    });
    const text = decoder.decode(reply.data);
    const parsed = JSON.parse(text) as { ok?: unknown; error?: { code?: unknown } };
    if (parsed.ok === true) return { ok: true };
    if (parsed.ok !== false) throw new Error(`a reply outside the envelope: ${text.slice(0, 200)}`);
    return { ok: false, code: parsed.error?.code };
  }

  it('answers 10,000 generated requests with typed errors, never a 5xx but unavailable', async () => {
    const ran = await fuzz(busCase, async ({ operation, authorization: auth, payload, header }) => {
      let data: Uint8Array;
      let runId: string | undefined;
      if (typeof payload === 'string') data = encoder.encode(payload);
      else if ('bytes' in payload) data = payload.bytes;
      else {
        const claimed = ledger.claim(payload.json);
        runId = claimed.runId;
        data = encoder.encode(JSON.stringify(claimed.body) ?? '');
      }
      const result = await request(operation, auth, data, header);
      if (result.ok) {
        if (operation === ApiOperation.SubmitDispatch) ledger.accepted(runId);
        return;
      }
      if (result.code === ErrorCode.Unavailable) ledger.unavailable(runId);
      if (!acceptableCode(result.code))
        throw new Error(`${operation} answered ${String(result.code)}`);
    });
    expect(ran).toBe(CASES);
  }, 120_000);

  it('refuses a submission whose event would not fit the broker, journaling nothing', async () => {
    const max = stack.nats.nc.info!.max_payload;
    const outcomes: Record<number, unknown> = {};
    for (const spare of [100, 1_000, 20_000]) {
      const { body, runId } = ledger.claim({
        runId: '$RUN',
        callId: `big-${spare}`,
        agent: { agentType: 'fuzz' },
        tool: 'list_dir',
        input: { blob: 'x'.repeat(max - spare - 200) },
      });
      const result = await request(
        ApiOperation.SubmitDispatch,
        `Bearer ${TOKENS.acmeAgent}`,
        encoder.encode(JSON.stringify(body)),
      );
      if (result.ok) ledger.accepted(runId);
      else if (result.code === ErrorCode.Unavailable) ledger.unavailable(runId);
      outcomes[spare] = result.ok ? 'accepted' : result.code;
    }
    // 100 bytes short of the limit, the request fits and its `requested` event cannot; with
    // 20 KB to spare both fit.
    expect(outcomes).toMatchObject({ 100: ErrorCode.TooLarge, 20_000: 'accepted' });
  }, 60_000);

  it('journaled exactly the submissions it accepted, and every service is healthy', async () => {
    await expectJournalMatches(stack, ledger, 50);
    await expectHealthy(stack);
  }, 150_000);
});
