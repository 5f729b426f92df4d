import { runUntilSignalled } from '@toolgate/service-kit';
import { loadWorktreeConfig } from './config';
import { startWorktree } from './worktree.app';

void runUntilSignalled('worktree', () =>
  startWorktree({ config: loadWorktreeConfig(process.env) }),
);
