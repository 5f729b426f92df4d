import { createSubjects, ErrorCode } from '@toolgate/contracts';
import { useTestNats, type TestNats, testKeys } from '@toolgate/testing';
import type { PendingCall } from './pending-call';
import { worktreeCwdResolver } from './worktree-cwd';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const VIEW = {
  worktreeId: 'wt_abc_g0',
  tenant: 'acme',
  runId: 'run-1',
  agentKey: 'coder:fixer',
  generation: 0,
  repo: '/srv/repo',
  baseRef: 'HEAD',
  baseCommit: 'a'.repeat(40),
  path: '/srv/worktrees/trees/wt_abc_g0',
  branch: 'toolgate/wt_abc_g0',
  state: 'active',
  createdAt: '2030-01-01T00:00:00.000Z',
  updatedAt: '2030-01-01T00:00:00.000Z',
};

/** A call under worktree isolation, with the agent whose tree it runs in. */
function call(isolation: PendingCall['isolation'] = { kind: 'worktree' }): PendingCall {
  return {
    tenant: 'acme',
    runId: 'run-1',
    dispatchId: 'd'.repeat(64),
    tool: {
      name: 'write_file',
      contractHash: 'c'.repeat(64),
      needsApproval: false,
      executor: 'inprocess',
    },
    input: {},
    agent: { agentType: 'coder', label: 'fixer' },
    isolation,
    causationId: 'd1:decided',
    decidedBy: 'default',
  };
}

describe('worktreeCwdResolver against a worktree responder on a real NATS server', () => {
  let t: TestNats;
  /** The responder's reply; undefined: it does not answer. */
  let answer: (request: unknown) => string | undefined;
  const seen: unknown[] = [];

  beforeAll(async () => {
    t = await useTestNats('worktree-cwd');
    t.nc.subscribe(t.subjects.worktree('acquire'), {
      callback: (_err, msg) => {
        const request = JSON.parse(decoder.decode(msg.data)) as unknown;
        seen.push(request);
        const reply = answer(request);
        if (reply !== undefined) msg.respond(encoder.encode(reply));
      },
    });
    await t.nc.flush();
  });
  afterAll(() => t.cleanup());

  const resolve = (c: PendingCall) =>
    worktreeCwdResolver(t.nc, t.subjects, '/srv/pinned', 2000, testKeys('tool-executor'))(c);

  it('keeps the pinned cwd without worktree isolation, asking nobody', async () => {
    seen.length = 0;
    expect(await resolve(call('none'))).toBe('/srv/pinned');
    expect(await resolve(call('readonly'))).toBe('/srv/pinned');
    expect(seen).toEqual([]);
  });

  it("acquires the agent's tree and answers its path", async () => {
    seen.length = 0;
    answer = () => JSON.stringify({ ok: true, path: VIEW.path, worktree: VIEW, created: true });
    expect(await resolve(call({ kind: 'worktree', ref: 'feature' }))).toBe(VIEW.path);
    expect(seen).toEqual([
      {
        tenant: 'acme',
        runId: 'run-1',
        agentKey: 'coder:fixer',
        ref: 'feature',
        causationId: 'd1:decided',
      },
    ]);
  });

  it("rethrows the service's typed error, and refuses a reply that is not the contract's", async () => {
    answer = () =>
      JSON.stringify({ ok: false, error: { code: 'config', message: 'unknown ref "nope"' } });
    await expect(resolve(call())).rejects.toMatchObject({
      code: ErrorCode.Config,
      message: 'unknown ref "nope"',
      retryable: false,
    });
    answer = () =>
      JSON.stringify({ ok: false, error: { code: 'unavailable', message: 'git is busy' } });
    await expect(resolve(call())).rejects.toMatchObject({
      code: ErrorCode.Unavailable,
      retryable: true,
    });
    answer = () => JSON.stringify({ ok: true, data: { path: VIEW.path } });
    await expect(resolve(call())).rejects.toMatchObject({
      code: ErrorCode.Internal,
      message: expect.stringContaining('malformed'),
      retryable: false,
    });
    answer = () => '{not json';
    await expect(resolve(call())).rejects.toThrow('not JSON');
  });

  it('reports a worktree service that does not answer as transient', async () => {
    const unserved = worktreeCwdResolver(
      t.nc,
      t.subjects,
      '/srv/pinned',
      200,
      testKeys('tool-executor'),
    );
    // Another prefix: nobody serves its worktree subject.
    const nobody = worktreeCwdResolver(
      t.nc,
      createSubjects(`${t.prefix}x`),
      '/srv/pinned',
      200,
      testKeys('tool-executor'),
    );
    answer = () => undefined;
    await expect(unserved(call())).rejects.toMatchObject({
      code: ErrorCode.Unavailable,
      retryable: true,
    });
    await expect(nobody(call())).rejects.toMatchObject({
      code: ErrorCode.Unavailable,
      retryable: true,
    });
  });
});
