import { mkdir, mkdtemp, realpath, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createSubjects, ErrorCode, worktreeIdOf } from '@toolgate/contracts';
import { useTestNats, type TestNats, testKeys } from '@toolgate/testing';
import type { PendingCall } from './pending-call';
import { worktreeCwdResolver } from './worktree-cwd';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The id the worktree service gives the tree of `call()`'s agent. */
const TREE_ID = worktreeIdOf('acme', 'run-1', 'coder:fixer', 0);

/** The worktree root of these tests (made in `beforeAll`), and the agent's tree under it. */
let root = '';
let treePath = '';

/** The tree as the worktree service reports it, at `at` (default: the agent's tree). */
function viewOf(at = treePath, worktreeId = TREE_ID) {
  return {
    worktreeId,
    tenant: 'acme',
    runId: 'run-1',
    agentKey: 'coder:fixer',
    generation: 0,
    repo: '/srv/repo',
    baseRef: 'HEAD',
    baseCommit: 'a'.repeat(40),
    path: at,
    branch: `toolgate/${worktreeId}`,
    state: 'active',
    createdAt: '2030-01-01T00:00:00.000Z',
    updatedAt: '2030-01-01T00:00:00.000Z',
  };
}

/** An acquire answer naming `at` as the tree. */
const acquired = (at = treePath, worktreeId = TREE_ID) =>
  JSON.stringify({ ok: true, path: at, worktree: viewOf(at, worktreeId), created: true });

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
    root = await realpath(await mkdtemp(path.join(tmpdir(), 'toolgate-worktree-cwd-')));
    treePath = path.join(root, 'trees', TREE_ID);
    await mkdir(treePath, { recursive: true });
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
  afterAll(async () => {
    await t.cleanup();
    await rm(root, { recursive: true, force: true });
  });

  const resolve = (c: PendingCall) =>
    worktreeCwdResolver(t.nc, t.subjects, '/srv/pinned', 2000, testKeys('tool-executor'), root)(c);

  it('keeps the pinned cwd without worktree isolation, asking nobody', async () => {
    seen.length = 0;
    expect(await resolve(call('none'))).toBe('/srv/pinned');
    expect(await resolve(call('readonly'))).toBe('/srv/pinned');
    expect(seen).toEqual([]);
  });

  it("acquires the agent's tree and answers its path", async () => {
    seen.length = 0;
    answer = () => acquired();
    expect(await resolve(call({ kind: 'worktree', ref: 'feature' }))).toBe(treePath);
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
    answer = () => JSON.stringify({ ok: true, data: { path: treePath } });
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
      root,
    );
    // Another prefix: nobody serves its worktree subject.
    const nobody = worktreeCwdResolver(
      t.nc,
      createSubjects(`${t.prefix}x`),
      '/srv/pinned',
      200,
      testKeys('tool-executor'),
      root,
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

  it('runs only in the tree it derives itself, whatever an answer names', async () => {
    const elsewhere = path.join(root, 'host-folder');
    await mkdir(elsewhere, { recursive: true });
    const otherTree = worktreeIdOf('acme', 'run-1', 'coder:other', 0);
    await mkdir(path.join(root, 'trees', otherTree), { recursive: true });
    const linked = path.join(root, 'trees', 'wt_link');
    await symlink(elsewhere, linked);
    const internal = { code: ErrorCode.Internal, retryable: false };
    for (const forged of [
      // A host folder, with the agent's own tree id or another one.
      acquired(elsewhere),
      acquired(elsewhere, 'wt_forged_g0'),
      // Another agent's tree, as it is named.
      acquired(path.join(root, 'trees', otherTree), otherTree),
      // Another agent's tree under this agent's id.
      acquired(path.join(root, 'trees', otherTree)),
      // The right name through `..`, and a symlink out of the root under a made-up id.
      acquired(path.join(treePath, '..', '..', 'host-folder')),
      acquired(linked, 'wt_link'),
      // A tree that does not exist.
      acquired(path.join(root, 'trees', worktreeIdOf('acme', 'run-1', 'coder:fixer', 1))),
    ]) {
      answer = () => forged;
      await expect(resolve(call())).rejects.toMatchObject(internal);
    }
    // The agent's own tree made a symlink to a host folder: not a tree.
    await rm(treePath, { recursive: true });
    await symlink(elsewhere, treePath);
    try {
      answer = () => acquired();
      await expect(resolve(call())).rejects.toMatchObject(internal);
    } finally {
      await rm(treePath);
      await mkdir(treePath);
    }
    // A path that only resolves to the tree is taken as the tree itself.
    answer = () => acquired(path.join(root, 'trees', '.', TREE_ID));
    expect(await resolve(call())).toBe(treePath);
  });
});
