import fc from 'fast-check';
import { runCliCaptured } from '../support/cli-run';
import { TOKENS, type TestStack } from '../support/test-stack';
import {
  acceptableCode,
  anyJson,
  CASES,
  expectHealthy,
  expectJournalMatches,
  fuzz,
  nested,
  RunLedger,
  startFuzzStack,
} from './fuzz-support';

const word = fc.stringMatching(/^[A-Za-z0-9_-]{1,10}$/);
/** What a shell hands the CLI as one argument: anything, flags and JSON included. */
const junkArg = fc.oneof(
  fc.string({ maxLength: 15 }),
  fc.constantFrom(
    '--',
    '-',
    '--help',
    '--json',
    '--wait',
    '--url',
    '--token',
    '=',
    '-x',
    '--input=',
  ),
);
/**
 * JSON text of a generated value. The hostile values are a few constants drawn again and again,
 * and a 3000-deep one takes V8 milliseconds to stringify each time (its cycle check walks the
 * nesting at every level): each object's text is made once.
 */
const textOf = (() => {
  const texts = new WeakMap<object, string>();
  return (value: unknown): string => {
    if (typeof value !== 'object' || value === null) return JSON.stringify(value) ?? 'null';
    let text = texts.get(value);
    if (text === undefined) texts.set(value, (text = JSON.stringify(value) ?? 'null'));
    return text;
  };
})();
/** JSON text for `--input` and policy files: good, bad, hostile. */
const jsonText = fc.oneof(
  { weight: 4, arbitrary: anyJson.map(textOf) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '{',
      '',
      'nul',
      '{"a":1}x',
      JSON.stringify(nested(3000)),
      '{"document":{"__proto__":{"engine":{}}}}',
      '{"engine":{"deny":[{"tool":"shell"}]}}',
      '{"document":{"engine":{"ask":[{"tool":"shell"}]}}}',
    ),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
);
const hex64 = fc.stringMatching(/^[0-9a-f]{64}$/);
const duration = fc.oneof(fc.constantFrom('30s', '10m', '2h', '1d', '0', '500ms'), junkArg);

/** `toolgate dispatch ...`, mostly well formed. */
const dispatchLine: fc.Arbitrary<string[]> = fc
  .record({
    tool: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom('list_dir', 'shell', 'read_file') },
      { weight: 1, arbitrary: fc.oneof(word, junkArg) },
    ),
    run: fc.oneof({ weight: 3, arbitrary: fc.constant('$RUN') }, { weight: 1, arbitrary: junkArg }),
    call: fc.oneof({ weight: 3, arbitrary: word }, { weight: 1, arbitrary: junkArg }),
    input: jsonText,
    rest: fc
      .subarray([['--json'], ['--isolation', 'readonly'], ['--label', 'x'], ['--wait', '0']])
      .map((options) => options.flat()),
    agent: fc.option(fc.oneof({ weight: 4, arbitrary: word }, { weight: 1, arbitrary: junkArg }), {
      nil: undefined,
    }),
    profile: fc.option(fc.oneof(word, junkArg), { freq: 4, nil: undefined }),
    drop: fc.oneof(
      { weight: 6, arbitrary: fc.constant('none') },
      { weight: 1, arbitrary: fc.constantFrom('run', 'call', 'input') },
    ),
  })
  .map(({ tool, run, call, input, rest, agent, profile, drop }) => [
    'dispatch',
    tool,
    ...(drop === 'run' ? [] : ['--run', run]),
    ...(drop === 'call' ? [] : ['--call', call]),
    ...(drop === 'input' ? [] : ['--input', input]),
    ...(agent === undefined ? [] : ['--agent', agent]),
    ...(profile === undefined ? [] : ['--profile', profile]),
    ...rest,
  ]);

/** One command line, mostly well formed, often not. */
const commandLine: fc.Arbitrary<string[]> = fc
  .tuple(
    fc.oneof(
      { weight: 4, arbitrary: dispatchLine },
      fc
        .record({
          run: fc.option(fc.oneof(word, junkArg), { nil: undefined }),
          tool: fc.option(fc.oneof(word, junkArg), { nil: undefined }),
          minAge: fc.option(duration, { nil: undefined }),
          status: fc.option(fc.oneof(fc.constantFrom('pending', 'resolved', 'all'), junkArg), {
            nil: undefined,
          }),
          limit: fc.option(fc.oneof(fc.constantFrom('1', '1000', '0', '5000', '-1'), junkArg), {
            nil: undefined,
          }),
          json: fc.boolean(),
        })
        .map((o) => [
          'approvals',
          'list',
          ...(o.run === undefined ? [] : ['--run', o.run]),
          ...(o.tool === undefined ? [] : ['--tool', o.tool]),
          ...(o.minAge === undefined ? [] : ['--min-age', o.minAge]),
          ...(o.status === undefined ? [] : ['--status', o.status]),
          ...(o.limit === undefined ? [] : ['--limit', o.limit]),
          ...(o.json ? ['--json'] : []),
        ]),
      fc
        .record({
          // A well-formed key is looked up with a grace period for a fresh suspension: keep it rare.
          key: fc.oneof({ weight: 1, arbitrary: hex64 }, { weight: 9, arbitrary: junkArg }),
          verdict: fc.subarray(['--allow', '--deny']),
          reason: fc.option(fc.string({ maxLength: 20 }), { nil: undefined }),
        })
        .map(({ key, verdict, reason }) => [
          'approvals',
          'resolve',
          key,
          ...verdict,
          ...(reason === undefined ? [] : ['--reason', reason]),
        ]),
      fc
        .tuple(fc.oneof({ weight: 1, arbitrary: hex64 }, { weight: 9, arbitrary: junkArg }))
        .map(([key]) => ['approvals', 'show', key]),
      fc.constant<string[]>(['tools', 'list']),
      fc.constant<string[]>(['policy', 'get', '--json']),
      fc
        .tuple(fc.option(fc.oneof(fc.constant('0'), junkArg), { nil: undefined }))
        .map(([rev]) => [
          'policy',
          'put',
          'policy.json',
          ...(rev === undefined ? [] : ['--expected-revision', rev]),
        ]),
      fc
        .tuple(fc.oneof(word, junkArg), jsonText)
        .map(([tool, input]) => ['policy', 'evaluate', tool, '--input', input]),
      // One run (mostly one that does not exist) keeps each replay small.
      fc
        .tuple(fc.oneof(word, junkArg), fc.option(fc.oneof(fc.constant('1h'), junkArg)))
        .map(([run, since]) => [
          'policy',
          'whatif',
          '--candidate',
          'policy.json',
          '--run',
          run,
          ...(since === null ? [] : ['--since', since]),
        ]),
      fc.constant<string[]>(['policy', 'test', 'policy.json', '--cases', 'cases.json']),
      fc.array(fc.oneof(word, junkArg), { maxLength: 5 }),
    ),
    // Now and then an argument out of place.
    fc.option(fc.tuple(fc.nat(), junkArg), { freq: 8, nil: undefined }),
  )
  .map(([argv, extra]) => {
    if (!extra) return argv;
    const [at, arg] = extra;
    const copy = [...argv];
    copy.splice(at % (copy.length + 1), 0, arg);
    return copy;
  });

const cliCase = fc.record({
  argv: commandLine,
  token: fc.constantFrom(TOKENS.acmeAdmin, TOKENS.acmeAgent, TOKENS.acmeApprover, undefined),
  file: jsonText,
});

/**
 * The CLI's arguments and JSON input under fuzz: 10,000 generated command lines run in-process
 * (`runCli`, as `toolgate` does) against the real gateway over HTTP. Every run must exit 0, 1 or 2
 * without throwing; a usage error (2) must have sent nothing; an API error must be typed and never
 * a 5xx but `unavailable`; nothing printed may contain the token; a refused dispatch must have
 * journaled nothing; every service must be healthy afterwards.
 */
describe('CLI edge fuzz', () => {
  let stack: TestStack;
  const ledger = new RunLedger('c');

  beforeAll(async () => {
    stack = await startFuzzStack('fuzz-cli');
  }, 60_000);
  afterAll(() => stack?.stop(), 60_000);

  it('exits 0, 1 or 2 on 10,000 generated command lines, with typed errors and nothing sent on a usage error', async () => {
    // One stop signal for every run, as `main.ts` passes its process's (never aborted here): a
    // run without one makes an AbortController of its own.
    const never = new AbortController().signal;
    const ran = await fuzz(
      cliCase,
      async ({ argv: generated, token, file }) => {
        // Each dispatch gets a run id of its own, to check the journal against afterwards.
        let runId: string | undefined;
        const argv = generated.map((arg) => {
          if (arg !== '$RUN') return arg;
          runId ??= ledger.claim({ runId: '$RUN' }).runId;
          return runId!;
        });
        let requests = 0;
        const {
          code,
          stdout: out,
          stderr: err,
        } = await runCliCaptured(
          argv,
          { TOOLGATE_URL: stack.all.gateway.url, TOOLGATE_TOKEN: token },
          {
            readFile: async () => file,
            signal: never,
            fetch: async (input, init) => {
              requests++;
              const res = await fetch(input, init);
              if (String(input).endsWith('/v1/dispatches')) {
                if (res.status < 300) ledger.accepted(runId);
                else if (res.status === 503) ledger.unavailable(runId); // `unavailable`
              }
              return res;
            },
          },
        );
        const where = `exit ${code}, stderr ${JSON.stringify(err.slice(0, 200))}`;
        if (![0, 1, 2].includes(code)) throw new Error(where);
        if (token && (out + err).includes(token))
          throw new Error(`the token was printed: ${where}`);
        if (code === 2 && requests > 0) throw new Error(`a usage error sent a request: ${where}`);
        const typed = /^([a-z-]+): /m.exec(err);
        if (code === 1 && err) {
          if (!typed || !acceptableCode(typed[1]))
            throw new Error(`an untyped or 5xx error: ${where}`);
        }
      },
      // 16 at a time, not 32: each run in flight holds a whole command tree (~100 KB of commander
      // objects) and its HTTP exchange, and at 32 those survive the young generation's
      // collections: on one seed the garbage collector paused 7-16 s at 32 and 3-4 s at 16 or 8,
      // the fuzz loop's wall no longer (25 s against 40 s). The few cases that wait out a grace
      // period still do not hold the others up.
      { concurrency: 16 },
    );
    expect(ran).toBe(CASES);
  }, 180_000);

  it('journaled exactly the dispatches it accepted, and every service is healthy', async () => {
    await expectJournalMatches(stack, ledger, 50);
    await expectHealthy(stack);
  }, 150_000);
});
