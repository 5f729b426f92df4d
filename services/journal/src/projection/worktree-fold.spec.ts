import type { WorktreeEvent } from '@toolgate/contracts';
import { at, worktreeFixture } from '../../test/fixtures/journal-events.fixture';
import { evolveWorktree, type WorktreeState } from './worktree-fold';

const w = worktreeFixture({ worktreeId: 'wt1' });
const given = (...events: WorktreeEvent[]) =>
  events.reduce<WorktreeState | undefined>(evolveWorktree, undefined);

describe('evolveWorktree', () => {
  it('acquire → collect → dispose', () => {
    expect(given(w.acquired(0), w.collected(5), w.disposed(6))).toMatchObject({
      status: 'disposed',
      repo: '/srv/repo',
      branch: 'toolgate/wt1',
      acquiredAt: at(0),
      collectedAt: at(5),
      disposedAt: at(6),
    });
  });

  it('a retained tree that hits the pin cap is dropped, with the drop reason', () => {
    expect(given(w.acquired(0), w.retained(3), w.dropped(9))).toMatchObject({
      status: 'dropped',
      reason: 'pin-cap',
      retainedAt: at(3),
    });
  });

  it('a redelivered acquire never revives a disposed tree', () => {
    expect(given(w.acquired(0), w.disposed(6), w.acquired(0))?.status).toBe('disposed');
  });
});
