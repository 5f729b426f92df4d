import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { runCli } from '@toolgate/cli';
import { NATS_URL, eventually } from '@toolgate/testing';
import { journalStatsCaughtUp, jsonLines, runCliCaptured } from '../support/cli-run';
import { settled } from '../support/dispatch-probes';
import { startTestStack, TOKENS, type TestStack } from '../support/test-stack';

const execFileAsync = promisify(execFile);
const BIN = path.resolve(__dirname, '../../../libs/cli/bin/toolgate.cjs');

/**
 * `toolgate journal tail | stats | rebuild` against the whole stack: an operator on the bus (the
 * stack's NATS and prefix), no gateway token.
 */
describe('toolgate journal against the whole stack', () => {
  let stack: TestStack;

  const cli = (argv: string[], env: Record<string, string> = {}) =>
    runCliCaptured(argv, { NATS_URL, TOOLGATE_PREFIX: stack.nats.prefix, ...env });

  const dispatch = async (runId: string, callId: string) => {
    const res = await stack.http('POST', '/v1/dispatches', TOKENS.acmeAdmin, {
      runId,
      callId,
      agent: { agentType: 'coder' },
      tool: 'list_dir',
      input: { path: '.' },
    });
    expect(res.status).toBe(202);
    return settled(stack, res.body.dispatchId as string);
  };

  beforeAll(async () => {
    stack = await startTestStack('jcli');
    await dispatch('j1', 'c1');
    await dispatch('j1', 'c2');
  });
  afterAll(() => stack.stop());

  it('stats: the stream, its events by type, and each consumer, caught up', async () => {
    const stats = await journalStatsCaughtUp({ NATS_URL, TOOLGATE_PREFIX: stack.nats.prefix });
    expect(stats.stream).toMatchObject({
      name: stack.nats.subjects.journal.stream,
      firstSeq: 1,
    });
    expect(stats.stream.messages).toBeGreaterThanOrEqual(8);
    expect(stats.eventsByType).toMatchObject({ requested: 2, decided: 2, started: 2, settled: 2 });
    expect(stats.deadLetters).toBe(0);
    expect(stats.consumers.map((c: { name: string }) => c.name)).toContain(
      `${stack.nats.prefix}_journal`,
    );
    const human = await cli(['journal', 'stats', '--tenant', 'acme']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^journal stream \S+: \d+ messages, [\d.]+ KiB, sequences 1-\d+/);
    expect(human.stdout).toMatch(/^requested\s+2$/m);
    expect(human.stdout).toMatch(new RegExp(`^${stack.nats.prefix}_journal\\s+0\\s+0\\s+`, 'm'));
    const globex = JSON.parse(
      (await cli(['journal', 'stats', '--tenant', 'globex', '--json'])).stdout,
    );
    expect(globex.eventsByType.requested).toBe(0);
    // No scan left behind: the counting consumers are gone.
    const names: string[] = [];
    for await (const ci of stack.nats.jsm.consumers.list(stack.nats.subjects.journal.stream))
      names.push(ci.name);
    expect(names.every((n) => n.startsWith(stack.nats.prefix))).toBe(true);
  });

  it('tail: follows new events live, by tenant and run, as lines or JSON, until stopped', async () => {
    const stop = new AbortController();
    let notes = '';
    let lines = '';
    const following = runCli(['journal', 'tail', '--tenant', 'acme', '--run', 'live-run'], {
      env: { NATS_URL, TOOLGATE_PREFIX: stack.nats.prefix },
      stdout: { write: (t: string) => (lines += t) },
      stderr: { write: (t: string) => (notes += t) },
      signal: stop.signal,
    });
    await eventually(() => (notes.includes('following') ? true : undefined));
    expect(notes).toBe(`following ${stack.nats.prefix}.journal.acme.live-run.> (Ctrl-C to stop)\n`);
    await dispatch('other-run', 'c1');
    await dispatch('live-run', 'c1');
    await eventually(() => (lines.split('\n').length > 4 ? true : undefined));
    stop.abort();
    expect(await following).toBe(0);
    const got = lines.trim().split('\n');
    expect(got.map((l) => l.split(' ')[4])).toEqual(['requested', 'decided', 'started', 'settled']);
    expect(got[0]).toMatch(
      /^\d+ \S+Z acme\/live-run \S+ requested list_dir \{"path":"\."\} by acme-admin$/,
    );
    expect(got[1]).toMatch(/ decided allow by default$/);
    expect(got[3]).toMatch(/ settled ok in \d+(\.\d+)? ms$/);
    expect(lines).not.toContain('other-run');

    // From a while back, as JSON, a fixed number of events.
    const json = await cli([
      'journal',
      'tail',
      '--run',
      'j1',
      '--since',
      '10m',
      '--count',
      '3',
      '--json',
    ]);
    expect(json.code).toBe(0);
    const events = jsonLines(json.stdout);
    expect(events).toHaveLength(3);
    expect(events[0]).toMatchObject({ seq: 1, event: { type: 'requested', runId: 'j1' } });
    expect(events[0].subject).toMatch(/\.journal\.acme\.j1\./);
  });

  it('rebuild: the journal rebuilds, compares and switches; the read API answers the same after', async () => {
    const before = await stack.http('GET', '/v1/runs/j1', TOKENS.acmeAdmin);
    const progress: [number, number][] = [];
    let stdout = '';
    const code = await runCli(['journal', 'rebuild', '--json'], {
      env: { NATS_URL, TOOLGATE_PREFIX: stack.nats.prefix },
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: () => undefined },
      progress: async () => ({
        update: (d, t) => void progress.push([d, t]),
        stop: () => undefined,
      }),
    });
    expect(code).toBe(0);
    const report = JSON.parse(stdout);
    expect(report).toMatchObject({
      live: stack.schema.schema,
      into: `${stack.schema.schema}_rebuild`,
      switched: true,
      differences: [],
    });
    expect(report.events).toBeGreaterThanOrEqual(12);
    expect(progress.length).toBeGreaterThan(0);
    expect((await stack.http('GET', '/v1/runs/j1', TOKENS.acmeAdmin)).body).toEqual(before.body);
    // And the live fold goes on into the switched tables.
    await dispatch('after-rebuild', 'c1');

    const human = await cli(['journal', 'rebuild', '--into', `${stack.schema.schema}_rebuild`]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^rebuilt \d+ events \(up to stream sequence \d+\) into /);
    expect(human.stdout).toContain(
      `switched: ${stack.schema.schema} now serves the rebuilt projection`,
    );

    const bad = await cli(['journal', 'rebuild', '--into', stack.schema.schema]);
    expect(bad).toMatchObject({ code: 1, stdout: '' });
    expect(bad.stderr).toBe(
      `invalid-request: cannot rebuild into the live schema ${stack.schema.schema}\n`,
    );
  }, 120_000);

  it('says plainly when there is no broker, no stream or no journal service', async () => {
    expect(await cli(['journal', 'stats'], { NATS_URL: 'nats://127.0.0.1:9' })).toEqual({
      code: 1,
      stdout: '',
      stderr: 'unavailable: cannot reach NATS at nats://127.0.0.1:9\n',
    });
    expect(await cli(['journal', 'stats'], { TOOLGATE_PREFIX: 'nosuchprefix' })).toEqual({
      code: 1,
      stdout: '',
      stderr: 'not-found: no journal stream nosuchprefix_journal (is TOOLGATE_PREFIX right?)\n',
    });
    expect(await cli(['journal', 'rebuild'], { TOOLGATE_PREFIX: 'nosuchprefix' })).toEqual({
      code: 1,
      stdout: '',
      stderr:
        'unavailable: no journal service answers on nosuchprefix.ops.journal.rebuild (is it running, with this TOOLGATE_PREFIX?)\n',
    });
    const badTenant = await cli(['journal', 'tail', '--tenant', 'a.b']);
    expect(badTenant.code).toBe(2);
    expect(badTenant.stderr).toMatch(/^error: tenant must be 1-128 characters/);
    expect((await cli(['journal', 'tail', '--count', 'many'])).code).toBe(2);
  });

  it('the real bin: npx toolgate journal stats --json in a child process', async () => {
    const { stdout, stderr } = await execFileAsync(
      process.execPath,
      [BIN, 'journal', 'stats', '--json'],
      {
        cwd: path.resolve(__dirname, '../../..'),
        env: { ...process.env, NATS_URL, TOOLGATE_PREFIX: stack.nats.prefix },
        timeout: 60_000,
      },
    );
    expect(stderr).toBe('');
    expect(JSON.parse(stdout).stream.name).toBe(stack.nats.subjects.journal.stream);
  }, 90_000);
});
