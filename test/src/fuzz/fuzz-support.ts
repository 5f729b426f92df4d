import fc from 'fast-check';
import { expect } from '@jest/globals';
import { ApiOperation, ConsumerRole, ErrorCode, isErrorCode } from '@toolgate/contracts';
import { HTTP_STATUS_BY_CODE } from '@toolgate/gateway';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

/**
 * What every edge's fuzz test shares: a stack to fire at, generators of good, bad and hostile
 * requests, and the checks run afterwards (what was refused journaled nothing; every service is
 * still healthy and a call still goes through).
 */

/** Cases per edge. */
export const CASES = 10_000;

/**
 * Runs `count` cases drawn from `arbitrary` through `run`, `concurrency` at a time (a case that
 * waits — a lookup given a grace period — must not hold the others up). The seed is
 * `FUZZ_SEED` when set, else random, and is named in a failure with its first few inputs, so a
 * failing run can be repeated. Returns how many cases ran.
 */
export async function fuzz<T>(
  arbitrary: fc.Arbitrary<T>,
  run: (value: T) => Promise<void>,
  { count = CASES, concurrency = 32 }: { count?: number; concurrency?: number } = {},
): Promise<number> {
  const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const values = fc.sample(arbitrary, { numRuns: count, seed });
  const failures: string[] = [];
  let next = 0;
  let ran = 0;
  const worker = async () => {
    while (next < values.length) {
      const value = values[next++]!;
      try {
        await run(value);
      } catch (err) {
        if (failures.length < 5)
          failures.push(
            `${(err as Error).message}\n  input: ${JSON.stringify(value)?.slice(0, 600)}`,
          );
      }
      ran++;
    }
  };
  // Jest raises the stack trace limit to 100 frames for its own failure messages; a case's error
  // is reported by its message alone, and the stack behind the edge refuses most of ten thousand
  // inputs with an error each, which would capture ten times the frames production does (10).
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 10;
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
  }
  if (failures.length) {
    throw new Error(`fuzz failed (FUZZ_SEED=${seed}):\n${failures.join('\n')}`);
  }
  return ran;
}

/** Where a generated body puts its run id; each case replaces it with one of its own. */
export const RUN_PLACEHOLDER = '$RUN';

/**
 * The whole stack but the tool executor, which is stopped at once: a fuzzed call the policy lets
 * through is decided and journaled like any other, but no tool ever runs on fuzzed input (a
 * `shell` with a random command line, a write to a random path).
 */
export async function startFuzzStack(label: string): Promise<TestStack> {
  // The approval sweeper at the journal's default period, not the test stacks' 100 ms (which tests
  // waiting on an expiry need): nothing here waits on one, and at 100 ms it swept ten times a
  // second through a minute of fuzzing, about a CPU-second for nothing.
  const stack = await startTestStack(label, { JOURNAL_SWEEP_INTERVAL_MS: '1000' });
  await stack.all.executor.stop();
  return stack;
}

/** Whether an edge's answer is acceptable: any typed refusal, never a 5xx but `unavailable`. */
export function acceptableCode(code: unknown): boolean {
  if (!isErrorCode(code)) return false;
  return HTTP_STATUS_BY_CODE[code] < 500 || code === ErrorCode.Unavailable;
}

/** Tokens a request may carry: each scope, another tenant's, and garbage. */
export const authorization: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...Object.values(TOKENS)).map((t) => `Bearer ${t}`) },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((s) => `Bearer ${s}`) },
);

/** `levels` objects or arrays nested in one another. */
export function nested(levels: number, kind: 'object' | 'array' = 'array'): unknown {
  let value: unknown = 0;
  for (let i = 0; i < levels; i++) value = kind === 'array' ? [value] : { a: value };
  return value;
}

/** JSON a hostile caller sends: deep, wide, long, and keys that reach prototypes. */
const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(
    nested(101),
    nested(3000),
    nested(3000, 'object'),
    JSON.parse('{"__proto__":{"polluted":true}}') as unknown,
    JSON.parse('{"constructor":{"prototype":{"polluted":true}}}') as unknown,
    { toString: 'x', valueOf: 1, hasOwnProperty: null },
    'x'.repeat(60_000),
    Array.from({ length: 5_000 }, (_, i) => i),
    -0,
    1e308,
    '\u0000\ud800',
  ),
  fc.integer({ min: 90, max: 120 }).map((n) => nested(n, 'object')),
);

/** Any JSON, now and then hostile. */
export const anyJson: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 6, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 1, arbitrary: hostileJson },
);

/** A string a field may get instead of the right one. */
const junkString = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.constantFrom('', ' ', 'a.b', '*', '>', 'x'.repeat(300), '../..', 'fz"\n', '__proto__'),
);

const token = fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/);
const sha = fc.stringMatching(/^[0-9a-f]{64}$/);
const toolName = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'list_dir',
      'read_file',
      'write_file',
      'shell',
      'http_fetch',
      'grep',
    ),
  },
  { weight: 1, arbitrary: fc.oneof(fc.constant('nope'), token) },
);
const agent = fc.record(
  { agentType: fc.oneof(token, junkString), label: junkString },
  { requiredKeys: ['agentType'] },
);
/**
 * Names a fuzzed registration may take: a few, so registrations replace one another and the
 * tenant's toolset stays small (listing it hashes every contract), and now and then a bad one.
 */
export const registeredName = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('fz_a', 'fz_b', 'fz_c', 'fz_d', 'list_dir') },
  { weight: 1, arbitrary: junkString },
);

const isolation = fc.oneof(
  fc.constantFrom('none', 'readonly'),
  fc.record({ kind: fc.constant('worktree'), ref: fc.option(token, { nil: undefined }) }),
);

/** A plausible body for each operation: right more often than not, so the accepting paths run too. */
const validBodies: Record<ApiOperation, fc.Arbitrary<Record<string, unknown>>> = {
  [ApiOperation.RegisterTool]: fc.record({
    tool: fc.record(
      {
        name: registeredName,
        description: fc.string({ minLength: 1, maxLength: 40 }),
        parameters: fc.oneof(
          fc.constant({ type: 'object' }),
          fc.record({
            type: fc.constant('object'),
            properties: fc.dictionary(token, fc.constant({ type: 'string' }), { maxKeys: 3 }),
          }),
          anyJson,
        ),
        version: fc.string({ maxLength: 8 }),
        policy: fc.record(
          {
            executor: fc.constantFrom('remote', 'inprocess', 'container'),
            risk: fc.constantFrom('read', 'write', 'execute'),
            timeoutMs: fc.integer({ min: -1, max: 4_000_000 }),
          },
          { requiredKeys: ['executor'] },
        ),
      },
      { requiredKeys: ['name', 'description', 'parameters'] },
    ),
  }),
  [ApiOperation.ListTools]: fc.constant({}),
  [ApiOperation.SubmitDispatch]: fc.record(
    {
      runId: fc.constant(RUN_PLACEHOLDER),
      callId: fc.oneof(token, fc.string({ minLength: 1, maxLength: 20 })),
      agent: fc.record({ agentType: token, label: token }, { requiredKeys: ['agentType'] }),
      tool: toolName,
      input: anyJson,
      isolation,
      taint: fc.constantFrom('public', 'internal', 'private'),
      wait: fc.oneof(fc.constant(false), fc.constant(0)),
    },
    { requiredKeys: ['runId', 'callId', 'agent', 'tool', 'input'] },
  ),
  [ApiOperation.ResetErrorCap]: fc.record(
    { runId: fc.oneof(token, junkString), reason: fc.string({ maxLength: 30 }) },
    { requiredKeys: ['runId'] },
  ),
  [ApiOperation.InstallScript]: fc.record(
    {
      name: fc.oneof(fc.constantFrom('fz_script', 'fz_script2'), junkString),
      source: fc.oneof(
        fc.constant('export default function run(input) { return input; }'),
        fc.string({ maxLength: 80 }),
      ),
      sidecar: anyJson,
      overwrite: fc.boolean(),
      policy: fc.record({ risk: fc.constantFrom('read', 'write', 'exotic') }),
    },
    { requiredKeys: ['name', 'source'] },
  ),
  [ApiOperation.ListScripts]: fc.constant({}),
  [ApiOperation.GetDispatch]: fc.record({ dispatchId: fc.oneof(token, junkString) }),
  [ApiOperation.GetDispatchValue]: fc.record({
    dispatchId: fc.oneof(token, junkString),
    part: fc.oneof(fc.constantFrom('input', 'effectiveInput', 'result'), junkString),
    offset: fc.oneof(fc.nat(), fc.integer(), junkString),
  }),
  // A short wait at most: a fuzzed case must not sit out a long one.
  [ApiOperation.AwaitDispatch]: fc.record(
    {
      runId: fc.oneof(token, junkString),
      dispatchId: fc.oneof(token, junkString),
      wait: fc.oneof(fc.constantFrom(0, 5, -1, 1.5, 300_001), junkString),
    },
    { requiredKeys: ['runId', 'dispatchId'] },
  ),
  [ApiOperation.GetRun]: fc.record({ runId: fc.oneof(token, junkString) }),
  [ApiOperation.PutPolicy]: fc.record(
    {
      document: fc.oneof(
        fc.constant({ engine: { deny: [{ tool: 'shell' }] } }),
        fc.record({
          engine: fc.record({
            ask: fc.array(fc.record({ tool: toolName, argv: fc.string({ maxLength: 10 }) }), {
              maxLength: 2,
            }),
          }),
        }),
        fc.dictionary(fc.string({ maxLength: 10 }), anyJson, { maxKeys: 3 }),
        hostileJson.filter((v) => typeof v === 'object' && v !== null && !Array.isArray(v)),
      ),
      expectedRevision: fc.integer({ min: -1, max: 1000 }),
    },
    { requiredKeys: ['document'] },
  ),
  [ApiOperation.GetPolicy]: fc.constant({}),
  // Always within one run (mostly one that does not exist), so each replay reads a few messages.
  [ApiOperation.WhatIfPolicy]: fc.record(
    {
      candidate: fc.oneof(
        fc.constant({ engine: { deny: [{ tool: 'shell' }] } }),
        fc.dictionary(fc.string({ maxLength: 10 }), anyJson, { maxKeys: 3 }),
        hostileJson.filter((v) => typeof v === 'object' && v !== null && !Array.isArray(v)),
      ),
      runId: fc.oneof(token, junkString),
      since: fc.oneof(fc.constant('2026-01-01T00:00:00.000Z'), junkString),
      limit: fc.integer({ min: -1, max: 20_000 }),
    },
    { requiredKeys: ['candidate', 'runId'] },
  ),
  [ApiOperation.EvaluatePolicy]: fc.record(
    { tool: toolName, input: anyJson, agent, isolation, profile: junkString },
    { requiredKeys: ['tool', 'input'] },
  ),
  [ApiOperation.ListApprovals]: fc.record(
    {
      runId: fc.oneof(token, junkString),
      tool: toolName,
      minAgeMs: fc.integer({ min: -5, max: 10_000 }),
      key: fc.oneof(sha, junkString),
      status: fc.constantFrom('pending', 'resolved', 'all', 'maybe'),
      order: fc.constantFrom('oldest', 'newest', 'sideways'),
      limit: fc.integer({ min: -1, max: 2000 }),
    },
    { requiredKeys: [] },
  ),
  [ApiOperation.GetApproval]: fc.oneof(
    // As for a resolution: a key alone gives the projection two seconds, so it is rarer here.
    {
      weight: 30,
      arbitrary: fc.record(
        {
          key: fc.oneof(sha, junkString),
          dispatchId: fc.oneof(token, junkString),
          runId: fc.oneof(token, junkString),
        },
        { requiredKeys: ['key', 'dispatchId', 'runId'] },
      ),
    },
    { weight: 1, arbitrary: fc.record({ key: sha }) },
  ),
  [ApiOperation.WhoAmI]: fc.constant({}),
  [ApiOperation.ImportMcpTools]: fc.record(
    {
      server: fc.oneof(fc.constant('fz_upstream'), junkString),
      tools: fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 }),
      risk: fc.dictionary(token, fc.constantFrom('read', 'write', 'exotic'), { maxKeys: 2 }),
    },
    { requiredKeys: ['server'] },
  ),
  [ApiOperation.ResolveApproval]: fc.oneof(
    // Naming the dispatch reads the stream at once; a key alone gives the projection two seconds
    // to show a fresh suspension, so those are rarer here.
    {
      weight: 30,
      arbitrary: fc.record(
        {
          key: fc.oneof(sha, junkString),
          decision: fc.oneof(fc.constantFrom('allow', 'deny', { decision: 'allow' }), anyJson),
          reason: fc.string({ maxLength: 30 }),
          dispatchId: fc.oneof(token, junkString),
          runId: fc.oneof(token, junkString),
          inputDigest: fc.oneof(sha, junkString),
        },
        { requiredKeys: ['key', 'decision', 'dispatchId', 'runId'] },
      ),
    },
    { weight: 1, arbitrary: fc.record({ key: sha, decision: fc.constant('allow') }) },
  ),
};

/** Keys a mutant keeps: without them a case waits out a grace period instead of failing fast. */
const KEEP: Partial<Record<ApiOperation, readonly string[]>> = {
  [ApiOperation.ResolveApproval]: ['dispatchId', 'runId'],
  [ApiOperation.GetApproval]: ['dispatchId', 'runId'],
};

/** One change that makes a good body (probably) bad. */
function mutated(
  body: fc.Arbitrary<Record<string, unknown>>,
  keep: readonly string[] = [],
): fc.Arbitrary<unknown> {
  return fc
    .tuple(body, fc.nat(), anyJson, junkString, fc.nat(4))
    .map(([value, pick, json, junk, how]) => {
      const keys = Object.keys(value);
      const key = keys.length ? keys[pick % keys.length]! : 'x';
      const copy: Record<string, unknown> = { ...value };
      if (how === 0 && !keep.includes(key)) delete copy[key];
      else if (how === 1) copy[key] = json;
      else if (how === 2) copy[key] = junk;
      else if (how === 3) copy[`extra_${junk}`] = json;
      else return json; // not the body's shape at all
      return copy;
    });
}

/** A request body for `operation`: a plausible one, a mutant of one, or anything at all. */
export function bodyFor(operation: ApiOperation): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 3, arbitrary: validBodies[operation] },
    { weight: 3, arbitrary: mutated(validBodies[operation], KEEP[operation]) },
    { weight: 1, arbitrary: anyJson },
  );
}

/** An operation, its caller's authorization and a body for it. */
export const apiCase = fc
  .constantFrom(...Object.values(ApiOperation))
  .chain((operation) =>
    fc.record({ operation: fc.constant(operation), authorization, body: bodyFor(operation) }),
  );

/**
 * Gives a submission's body a run id of its own (recorded in `runs` with whether it was accepted
 * later), and keeps a fuzzed `wait` from blocking a case.
 */
export class RunLedger {
  /** Run id → whether the submission using it was accepted. */
  readonly runs = new Map<string, boolean>();
  /**
   * Run ids whose submission was answered `unavailable`: neither accepted nor refused. It is what
   * the gateway answers when the broker's acknowledgement of `requested` does not come in time,
   * which a loaded broker may still have stored; the caller's contract is to submit the same call
   * again. The journal check holds these to neither side.
   */
  readonly unsettled = new Set<string>();
  private next = 0;

  constructor(private readonly label: string) {}

  /** The body with its placeholder run id replaced; `runId` is undefined when it had none. */
  claim(body: unknown): { body: unknown; runId: string | undefined } {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return { body, runId: undefined };
    }
    const copy = { ...(body as Record<string, unknown>) };
    let runId: string | undefined;
    if (copy.runId === RUN_PLACEHOLDER) {
      runId = `${this.label}${this.next++}`;
      copy.runId = runId;
      this.runs.set(runId, false);
    }
    if (copy.wait === true || (typeof copy.wait === 'number' && copy.wait > 0)) copy.wait = 0;
    return { body: copy, runId };
  }

  accepted(runId: string | undefined): void {
    if (runId !== undefined) this.runs.set(runId, true);
  }

  /** The submission using `runId` was answered `unavailable` (see {@link unsettled}). */
  unavailable(runId: string | undefined): void {
    if (runId !== undefined) this.unsettled.add(runId);
  }
}

/**
 * The journal was written for exactly the submissions that were accepted: every accepted run has
 * events, and no refused one has any (one answered `unavailable` was not refused: see
 * {@link RunLedger.unsettled}). More than `atLeast` of each kind must have happened, or the
 * check proved little.
 */
export async function expectJournalMatches(
  stack: TestStack,
  ledger: RunLedger,
  atLeast: number,
): Promise<void> {
  const { jsm, subjects } = stack.nats;
  const journaledRuns = async () => {
    const info = await jsm.streams.info(subjects.journal.stream, {
      subjects_filter: subjects.journal.all,
    });
    // <prefix>.journal.<tenant>.<runId>.<key>.<type>
    return new Set(Object.keys(info.state.subjects ?? {}).map((s) => s.split('.')[3]));
  };
  const expected = [...ledger.runs].filter(([, accepted]) => accepted).map(([run]) => run);
  // An accepted submission's `requested` is acknowledged before it answers: it is there already.
  const journaled = await journaledRuns();
  const refused = [...ledger.runs].filter(([run, ok]) => !ok && !ledger.unsettled.has(run));
  const refusedButJournaled = refused.filter(([run]) => journaled.has(run));
  const acceptedButMissing = expected.filter((run) => !journaled.has(run));
  expect({ refusedButJournaled, acceptedButMissing }).toEqual({
    refusedButJournaled: [],
    acceptedButMissing: [],
  });
  expect(expected.length).toBeGreaterThan(atLeast);
  expect(refused.length).toBeGreaterThan(atLeast);
}

/**
 * Every service still answers ready, and a call still goes all the way: a known policy is put,
 * and a call it denies is journaled, decided and settled by the evaluator, and read back through
 * the journal's projection.
 */
export async function expectHealthy(stack: TestStack): Promise<void> {
  // The fuzzing left a backlog of accepted calls to decide and fold; a healthy pipeline works it
  // off (all but the stopped executor's consumer).
  const { jsm, subjects } = stack.nats;
  await eventually(
    async () => {
      const consumers = await jsm.consumers.list(subjects.journal.stream).next();
      const busy = consumers.filter(
        (c) =>
          !c.name.startsWith(subjects.consumer(ConsumerRole.Executor)) &&
          c.num_pending + c.num_ack_pending > 0,
      );
      return busy.length === 0 ? true : undefined;
    },
    { what: 'the consumers to drain', timeoutMs: 120_000, intervalMs: 250 },
  );
  // Ready once the backlog is worked off: a readiness probe answered while the journal folds ten
  // thousand calls on a loaded 2-core machine would time the fold, not check health.
  for (const service of [
    stack.all.gateway,
    stack.all.evaluator,
    stack.all.journal,
    stack.all.worktree,
  ]) {
    const ready = await fetch(`${service.url}/readyz`);
    expect({ service: service.name, status: ready.status }).toEqual({
      service: service.name,
      status: 200,
    });
  }
  const policy = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
    document: { engine: { deny: [{ tool: 'list_dir', reason: 'health check' }] } },
  });
  expect(policy.status).toBe(200);
  const call = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAgent, {
    runId: 'health',
    callId: `after-fuzz-${Date.now()}`,
    agent: { agentType: 'fuzz' },
    tool: 'list_dir',
    input: { path: '.' },
    wait: 20_000,
  });
  expect(call.body?.settled).toMatchObject({ outcome: 'denied' });
  await eventually(
    async () => {
      const d = await stack.http('GET', `/v1/dispatches/${call.body.dispatchId}`, TOKENS.acmeAgent);
      return d.body?.dispatch?.status === 'settled' ? true : undefined;
    },
    { what: 'the health-check call in the projection', timeoutMs: 20_000 },
  );
}
