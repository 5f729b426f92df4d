import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runCli } from '@toolgate/cli';
import { eventually } from '@toolgate/testing';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe('toolgate CLI against the whole stack', () => {
  let stack: TestStack;
  /** Everything the CLI printed in this file, to prove no token ever appears in it. */
  const printed: string[] = [];

  const cli = async (
    argv: string[],
    env: Record<string, string | undefined> = {},
  ): Promise<Run> => {
    let stdout = '';
    let stderr = '';
    const code = await runCli(argv, {
      env: { TOOLGATE_URL: stack.all.gateway.url, TOOLGATE_TOKEN: TOKENS.acmeAdmin, ...env },
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
    });
    printed.push(stdout, stderr);
    return { code, stdout, stderr };
  };

  beforeAll(async () => {
    stack = await startTestStack('cli');
  });
  afterAll(() => stack.stop());

  it('walks an approval through list, show and resolve on a parked call', async () => {
    const put = await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { engine: { ask: [{ tool: 'shell' }] } },
    });
    expect(put.status).toBe(200);

    // The same call twice: parked now, replayed from the journal once it is resolved.
    const shellCall = [
      'dispatch',
      'shell',
      '--run',
      'cli-run',
      '--call',
      'c1',
      '--input',
      '{"command":"echo from-cli"}',
    ];
    const parked = await cli([...shellCall, '--wait', '5000']);
    expect(parked).toMatchObject({ code: 0, stderr: '' });
    expect(parked.stdout).toMatch(/accepted, suspended/);
    expect(parked.stdout).toContain('parked for approval');

    const listedJson = await eventually(async () => {
      const r = await cli(['approvals', 'list', '--run', 'cli-run', '--json']);
      const rows = JSON.parse(r.stdout) as {
        approvalKey: string;
        toolName: string;
        status: string;
        inputPreview: unknown;
      }[];
      return rows.length ? rows : undefined;
    });
    expect(listedJson).toHaveLength(1);
    expect(listedJson[0]).toMatchObject({
      toolName: 'shell',
      status: 'pending',
      inputPreview: { summary: 'echo from-cli', truncated: false },
    });
    const key = listedJson[0]!.approvalKey;

    const table = await cli(['approvals', 'list', '--run', 'cli-run', '--tool', 'shell']);
    expect(table.code).toBe(0);
    const [header, row] = table.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^KEY\s+TOOL\s+RUN\s+AGE\s+EXPIRES\s+STATUS\s+INPUT$/);
    expect(row).toContain(key);
    expect(row).toMatch(/shell\s+cli-run/);
    expect(row).toContain('pending');

    // Nothing has been pending for a day, and another tool has no approvals.
    expect((await cli(['approvals', 'list', '--min-age', '1d'])).stdout).toBe('no approvals\n');
    expect((await cli(['approvals', 'list', '--tool', 'read_file', '--json'])).stdout).toBe('[]\n');

    const shown = await cli(['approvals', 'show', key]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^key:\s+[0-9a-f]{64}$/m);
    expect(shown.stdout).toMatch(/^status:\s+pending$/m);
    expect(shown.stdout).toMatch(/^run:\s+cli-run$/m);
    expect(shown.stdout).toContain('"command": "echo from-cli"');

    // The approver (approve scope only) resolves it; the call then runs and settles.
    const resolved = await cli(
      ['approvals', 'resolve', key, '--allow', '--reason', 'looks harmless'],
      { TOOLGATE_TOKEN: TOKENS.acmeApprover },
    );
    expect(resolved).toMatchObject({ code: 0, stderr: '' });
    expect(resolved.stdout).toMatch(
      new RegExp(
        `^allowed ${key} \\(dispatch [A-Za-z0-9_-]+\\) by acme-approver: looks harmless\\n$`,
      ),
    );

    const replay = await eventually(async () => {
      const r = await cli([...shellCall, '--json']);
      const body = JSON.parse(r.stdout) as {
        status: string;
        state: string;
        settled?: { outcome: string; result?: unknown };
      };
      return body.state === 'settled' ? body : undefined;
    });
    expect(replay).toMatchObject({ status: 'replayed', settled: { outcome: 'ok' } });
    expect(JSON.stringify(replay.settled?.result)).toContain('from-cli');

    const again = await cli(['approvals', 'resolve', key, '--deny'], {
      TOOLGATE_TOKEN: TOKENS.acmeApprover,
    });
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^already-resolved: /);

    const after = await eventually(async () => {
      const r = await cli(['approvals', 'show', key, '--json']);
      const body = JSON.parse(r.stdout) as {
        status: string;
        decision: string;
        resolvedBy: string;
        reason: string;
      };
      return body.status === 'resolved' ? body : undefined;
    });
    expect(after).toMatchObject({
      decision: 'allow',
      resolvedBy: 'acme-approver',
      reason: 'looks harmless',
    });
    // The list is the projection's, which folds the resolution a moment after the journal has it
    // (`show` reads the journal's parked call).
    const listed = await eventually(async () => {
      const r = await cli([
        'approvals',
        'list',
        '--run',
        'cli-run',
        '--status',
        'resolved',
        '--json',
      ]);
      return r.stdout.includes(key) ? r.stdout : undefined;
    });
    expect(listed).toContain(key);

    await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
  });

  it('lists tools as a table and as JSON', async () => {
    const table = await cli(['tools', 'list']);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^NAME\s+EXECUTOR\s+RISK\s+APPROVAL\s+VERSION\s+DESCRIPTION$/m);
    expect(table.stdout).toMatch(/^read_file\s+inprocess\s+read\s/m);
    expect(table.stdout).toMatch(/^toolset hash: [0-9a-f]{64}$/m);
    const json = JSON.parse((await cli(['tools', 'list', '--json'])).stdout) as {
      tools: { name: string }[];
      toolsetHash: string;
    };
    expect(json.tools.map((t) => t.name)).toContain('shell');
    expect(json.toolsetHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('installs a script tool and lists the scripts inventory, refusals with their reason', async () => {
    const file = path.join(stack.workdir, 'cli_echo.js');
    await writeFile(
      file,
      '// @tool cli_echo\n// @description Echoes a word\n// @param word string required "w"\nreturn params.word;',
    );
    const installed = await cli(['tools', 'install-script', file]);
    expect(installed).toMatchObject({
      code: 0,
      stdout: 'installed cli_echo (requires nothing, risk read)\n',
    });
    const again = await cli(['tools', 'install-script', file]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^conflict: /);
    expect((await cli(['tools', 'install-script', file, '--overwrite'])).stdout).toMatch(
      /^replaced cli_echo/,
    );
    const agentOnly = await cli(['tools', 'install-script', file, '--overwrite'], {
      TOOLGATE_TOKEN: TOKENS.acmeAgent,
    });
    expect(agentOnly.stderr).toMatch(/^forbidden: /);
    const table = await cli(['tools', 'scripts']);
    expect(table.stdout).toMatch(/^cli_echo\s+installed\s+read\s+-\s+word\s/m);
    const inventory = JSON.parse((await cli(['tools', 'scripts', '--json'])).stdout) as {
      loaded: { name: string; requires: string[]; parameters: unknown }[];
      skipped: unknown[];
    };
    expect(inventory.loaded).toEqual([
      expect.objectContaining({ name: 'cli_echo', requires: [], parameters: expect.any(Object) }),
    ]);
    expect(inventory.skipped).toEqual([]);
    const broken = path.join(stack.workdir, 'cli_broken.js');
    await writeFile(broken, '// @tool cli_broken\n// @description d\nreturn (;');
    const refused = await cli(['tools', 'install-script', broken]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^config: script cli_broken refused \(syntax-error\)/);
  });

  it('puts, gets and dry-runs the policy', async () => {
    const file = path.join(stack.workdir, 'policy.json');
    await writeFile(
      file,
      JSON.stringify({ engine: { deny: [{ tool: 'write_file', reason: 'frozen' }] } }),
    );
    const put = await cli(['policy', 'put', file]);
    expect(put.code).toBe(0);
    const revision = Number(/^policy revision (\d+)$/.exec(put.stdout.trim())?.[1]);
    expect(revision).toBeGreaterThan(0);
    const got = JSON.parse((await cli(['policy', 'get', '--json'])).stdout) as {
      revision: number;
      document: unknown;
    };
    expect(got).toEqual({
      revision,
      document: { engine: { deny: [{ tool: 'write_file', reason: 'frozen' }] } },
    });
    const evaluated = await cli([
      'policy',
      'evaluate',
      'write_file',
      '--input',
      '{"path":"a.txt","content":"x"}',
    ]);
    expect(evaluated.code).toBe(0);
    expect(evaluated.stdout).toMatch(/^deny by deny-rule .*frozen/);
    const stale = await cli(['policy', 'put', file, '--expected-revision', String(revision - 1)]);
    expect(stale.code).toBe(1);
    expect(stale.stderr).toMatch(/^conflict: /);

    // A denied dispatch went through the API but did not succeed: exit 1, with the policy's reason.
    const denied = await cli([
      'dispatch',
      'write_file',
      '--run',
      'cli-run-2',
      '--call',
      'w1',
      '--input',
      '{"path":"a.txt","content":"x"}',
      '--wait',
    ]);
    expect(denied.code).toBe(1);
    expect(denied.stdout).toMatch(/denied: denied: .*frozen/);
    await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
  });

  it('refuses a key two runs share, listing both calls, until --dispatch or --run names one', async () => {
    await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, {
      document: { engine: { ask: [{ tool: 'shell' }] } },
    });
    const input = '{"command":"echo same-call"}';
    const park = async (run: string) => {
      const r = await cli(['dispatch', 'shell', '--run', run, '--call', 'c1', '--input', input]);
      expect(r.code).toBe(0);
      return /dispatch (\S+)/.exec(r.stdout)![1]!;
    };
    const first = await park('cli-shared-1');
    const second = await park('cli-shared-2');
    const rows = await eventually(async () => {
      const r = await cli(['approvals', 'list', '--tool', 'shell', '--json']);
      const all = (JSON.parse(r.stdout) as { approvalKey: string; dispatchId: string }[]).filter(
        (a) => a.dispatchId === first || a.dispatchId === second,
      );
      return all.length === 2 ? all : undefined;
    });
    const key = rows[0]!.approvalKey;
    expect(rows[1]!.approvalKey).toBe(key);

    const ambiguous = await cli(['approvals', 'resolve', key, '--allow']);
    expect(ambiguous).toMatchObject({ code: 1, stdout: '' });
    expect(ambiguous.stderr).toMatch(/^conflict: approval key \S+ matches 2 pending calls/);
    expect(ambiguous.stderr).toMatch(
      new RegExp(`--dispatch ${first}\\s+run cli-shared-1\\s+shell`),
    );
    expect(ambiguous.stderr).toMatch(
      new RegExp(`--dispatch ${second}\\s+run cli-shared-2\\s+shell`),
    );

    const shown = await cli(['approvals', 'show', key, '--json']);
    expect((JSON.parse(shown.stdout) as unknown[]).length).toBe(2);

    const byDispatch = await cli(['approvals', 'resolve', key, '--deny', '--dispatch', second]);
    expect(byDispatch).toMatchObject({ code: 0, stderr: '' });
    expect(byDispatch.stdout).toContain(`(dispatch ${second})`);
    const byRun = await cli(['approvals', 'resolve', key, '--deny', '--run', 'cli-shared-1']);
    expect(byRun).toMatchObject({ code: 0, stderr: '' });
    expect(byRun.stdout).toContain(`(dispatch ${first})`);
    await stack.http('PUT', '/v1/policy', TOKENS.acmeAdmin, { document: {} });
  });

  it('exits 2 on bad input, naming the problem', async () => {
    const badJson = await cli([
      'dispatch',
      'read_file',
      '--run',
      'r',
      '--call',
      'c',
      '--input',
      '{not json',
    ]);
    expect(badJson.code).toBe(2);
    expect(badJson.stderr).toMatch(/^error: --input is not valid JSON/);

    const unknownFlag = await cli(['tools', 'list', '--bogus']);
    expect(unknownFlag.code).toBe(2);
    expect(unknownFlag.stderr).toContain("unknown option '--bogus'");

    const noToken = await cli(['tools', 'list'], { TOOLGATE_TOKEN: undefined });
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toBe('error: no token: set TOOLGATE_TOKEN or pass --token\n');

    const badKey = await cli(['approvals', 'show', 'abc123']);
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toContain('approval key must be 64 hex characters');

    const both = await cli(['approvals', 'resolve', 'a'.repeat(64), '--allow', '--deny']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('exactly one of --allow or --deny');

    const badAge = await cli(['approvals', 'list', '--min-age', 'soon']);
    expect(badAge.code).toBe(2);
    expect(badAge.stderr).toContain('--min-age must be a duration');

    const missing = await cli(['dispatch', 'read_file', '--call', 'c', '--input', '{}']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("required option '--run <runId>' not specified");
  });

  it('exits 1 with code: message on API errors, and never prints the token', async () => {
    const forbidden = await cli(['approvals', 'resolve', 'f'.repeat(64), '--allow'], {
      TOOLGATE_TOKEN: TOKENS.acmeAgent,
    });
    expect(forbidden).toMatchObject({ code: 1, stdout: '' });
    expect(forbidden.stderr).toBe('forbidden: this token lacks the "approve" scope\n');

    const badToken = await cli(['--token', 'wrong-token-wrong-token', 'tools', 'list'], {
      TOOLGATE_TOKEN: undefined,
    });
    expect(badToken.code).toBe(1);
    expect(badToken.stderr).toBe('unauthorized: invalid bearer token\n');

    const notFound = await cli(['approvals', 'show', 'f'.repeat(64)]);
    expect(notFound.code).toBe(1);
    expect(notFound.stderr).toMatch(/^not-found: /);

    const unknownTool = await cli([
      'dispatch',
      'no_such_tool',
      '--run',
      'r',
      '--call',
      'c',
      '--input',
      '{}',
    ]);
    expect(unknownTool.code).toBe(1);
    expect(unknownTool.stderr).toBe('unknown-tool: unknown tool no_such_tool\n');

    // A token passed as a flag, then echoed back by a usage error, is still redacted.
    const echoed = await cli(
      ['--token', TOKENS.globexAdmin, 'tools', 'list', `--${TOKENS.globexAdmin}`],
      { TOOLGATE_TOKEN: undefined },
    );
    expect(echoed.code).toBe(2);
    expect(echoed.stderr).toContain("unknown option '--***'");

    const unreachable = await cli(['tools', 'list'], { TOOLGATE_URL: 'http://127.0.0.1:9' });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toBe(
      'unavailable: cannot reach the gateway at http://127.0.0.1:9\n',
    );
  });

  // Runs last: everything printed above, success or failure, is searched for every token.
  it('never printed a token in anything above', () => {
    expect(printed.length).toBeGreaterThan(20);
    const all = printed.join('\n');
    for (const token of Object.values(TOKENS)) expect(all).not.toContain(token);
  });
});
