import { ExitCode, runCli } from './run-cli';

interface Sent {
  method: string;
  url: string;
  body: unknown;
}

/**
 * Runs the CLI with a fetch that records what it sends and answers `status` with `answer`: these
 * specs check what the CLI puts on the wire and how it reads an answer, not the gateway.
 */
async function run(argv: string[], status: number, answer: unknown) {
  const sent: Sent[] = [];
  let stdout = '';
  let stderr = '';
  const fetch = (async (url: string, init: RequestInit) => {
    sent.push({
      method: String(init.method),
      url,
      body: init.body === undefined ? undefined : JSON.parse(String(init.body)),
    });
    return new Response(JSON.stringify(answer), { status });
  }) as typeof globalThis.fetch;
  const code = await runCli(argv, {
    env: { TOOLGATE_URL: 'http://gateway.test', TOOLGATE_TOKEN: 'a-token-of-some-length' },
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    fetch,
  });
  return { code, stdout, stderr, sent };
}

const accepted = { dispatchId: 'd1', status: 'accepted', state: 'requested' };
const dispatch = ['dispatch', 'echo', '--run', 'r1', '--call', 'c1', '--input', '{"n":1}'];

describe('toolgate dispatch --wait', () => {
  it.each<[string, string[], unknown]>([
    ["a bare --wait asks for the gateway's default", ['--wait'], true],
    ['--wait <ms> asks for that long', ['--wait', '500'], 500],
    ['no --wait does not wait', [], undefined],
  ])('%s', async (_what, flags, wait) => {
    const { code, sent } = await run([...dispatch, ...flags], 202, accepted);
    expect(code).toBe(ExitCode.Ok);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ method: 'POST', url: 'http://gateway.test/v1/dispatches' });
    expect((sent[0]!.body as { wait?: unknown }).wait).toBe(wait);
  });

  it('refuses a --wait that is not a count as usage, sending nothing', async () => {
    const { code, stderr, sent } = await run([...dispatch, '--wait', 'soon'], 202, accepted);
    expect(code).toBe(ExitCode.Usage);
    expect(stderr).toMatch(/^error: --wait must be a non-negative integer/);
    expect(sent).toEqual([]);
  });
});

describe('toolgate errors from the gateway', () => {
  it("prints a typed error's code and message and exits 1", async () => {
    const { code, stdout, stderr } = await run(['tools', 'list'], 403, {
      error: { code: 'forbidden', message: 'this token lacks the "dispatch" scope' },
    });
    expect(code).toBe(ExitCode.Failed);
    expect(stdout).toBe('');
    expect(stderr).toBe('forbidden: this token lacks the "dispatch" scope\n');
  });

  it('reports an answer without a typed error as internal', async () => {
    const { code, stderr } = await run(['tools', 'list'], 502, { oops: true });
    expect(code).toBe(ExitCode.Failed);
    expect(stderr).toBe('internal: the gateway answered 502 without a typed error\n');
  });
});
