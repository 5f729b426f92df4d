import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * deploy/nats/nats.conf must be accepted by the nats-server CI runs (2.9): `nats-server -t` parses
 * it and validates the options. Not skipped when the binary is missing: CI installs it, so its
 * absence is a broken environment and fails with a message saying so.
 */

const root = path.join(__dirname, '..', '..', '..');
const conf = path.join(root, 'deploy/nats/nats.conf');
const NATS_SERVER = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';
const text = readFileSync(conf, 'utf8');
/** Every `$VARIABLE` the config takes from the environment (passwords, POD_NAME). */
const variables = [...new Set([...text.matchAll(/:\s*\$([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!))];

function check(env: Record<string, string>) {
  if (!existsSync(NATS_SERVER)) {
    throw new Error(
      `nats-server not found at ${NATS_SERVER}: install it (Debian: apt-get install nats-server) or set NATS_SERVER_BIN`,
    );
  }
  return spawnSync(NATS_SERVER, ['-t', '-c', conf], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', ...env },
  });
}

describe('deploy/nats/nats.conf', () => {
  it('is valid for nats-server (`nats-server -t -c`) with its environment filled in', () => {
    expect(variables).toEqual(
      expect.arrayContaining([
        'POD_NAME',
        'NATS_SYS_PASSWORD',
        'TOOLGATE_NATS_GATEWAY_PASSWORD',
        'TOOLGATE_NATS_TEAM_ACME_PASSWORD',
      ]),
    );
    const result = check(
      Object.fromEntries(
        variables.map((v) => [v, v === 'POD_NAME' ? 'nats-0' : `test-${v.toLowerCase()}`]),
      ),
    );
    expect(`${result.stdout}${result.stderr}`).toContain('is valid');
    expect(result.status).toBe(0);
  });

  it('refuses to load when a password variable is missing, so no user can end up without one', () => {
    const env = Object.fromEntries(
      variables.filter((v) => v !== 'TOOLGATE_NATS_JOURNAL_PASSWORD').map((v) => [v, 'x']),
    );
    const result = check(env);
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('TOOLGATE_NATS_JOURNAL_PASSWORD');
  });

  it('declares JetStream, a three-route cluster, one user per service, the operators’ and the example team', () => {
    expect(text).toMatch(/^jetstream\s*\{/m);
    expect(text).toMatch(/^cluster\s*\{/m);
    const users = [...text.matchAll(/user:\s*([a-z0-9-]+)/g)].map((m) => m[1]);
    expect(users).toEqual([
      'sys',
      'gateway',
      'permission-evaluator',
      'tool-executor',
      'journal',
      'worktree',
      'ops',
      'team-acme',
    ]);
  });

  it('confines the team user to its own tenant’s subjects and the API, with no JetStream access', () => {
    const team = text.slice(text.indexOf('user: team-acme'));
    const block = team.slice(0, team.indexOf('\n      }'));
    const allows = [...block.matchAll(/"([^"]+)"/g)].map((m) => m[1]!);
    expect(allows.sort()).toEqual([
      '_INBOX_acme.>',
      'toolgate.api.>',
      'toolgate.hooks.acme.>',
      'toolgate.journal.acme.>',
      'toolgate.tools.acme.>',
    ]);
    expect(block).toContain('allow_responses: true');
  });
});
