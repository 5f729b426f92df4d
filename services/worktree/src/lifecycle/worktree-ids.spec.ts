import { isSubjectToken } from '@toolgate/contracts';
import { agentSlotOf, branchOf, worktreeIdOf } from './worktree-ids';

describe('worktree ids', () => {
  it('are stable per spawn, distinct per generation and valid subject tokens', () => {
    const a = worktreeIdOf('acme', 'run-1', 'coder:x', 0);
    expect(worktreeIdOf('acme', 'run-1', 'coder:x', 0)).toBe(a);
    expect(worktreeIdOf('acme', 'run-1', 'coder:x', 1)).not.toBe(a);
    expect(worktreeIdOf('acme', 'run-2', 'coder:x', 0)).not.toBe(a);
    expect(isSubjectToken(a)).toBe(true);
    expect(branchOf(a)).toBe(`toolgate/${a}`);
  });

  it('do not collide when fields shift across the separator', () => {
    expect(agentSlotOf('ab', 'c', 'd')).not.toBe(agentSlotOf('a', 'bc', 'd'));
  });
});
