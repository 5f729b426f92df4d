import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  loadAllInOneOptions,
  startAllInOne,
  type AllInOne,
  type AllInOneOptions,
} from '@toolgate/all-in-one';
import { jetstream } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { isPermissionViolation } from '@toolgate/bus';
import {
  EVENT_SIGNING,
  JOURNAL_EVENT_TYPES,
  ServiceIdentity,
  type JournalEventType,
  type KeySet,
} from '@toolgate/contracts';
import { freePort, startNatsServer, type NatsServerProcess } from '@toolgate/testing';
import { runCliCaptured, type CliRun } from '../support/cli-run';
import { REPO_ROOT } from './observability-queries';

/** The shipped NATS configuration (a three-node cluster's, one file for every node). */
export const SHIPPED_NATS_CONF = path.join(REPO_ROOT, 'deploy/nats/nats.conf');

/** The user each service connects as, and the variable its password comes from. */
export const SERVICE_USERS = {
  gateway: { user: 'gateway', passwordVariable: 'TOOLGATE_NATS_GATEWAY_PASSWORD' },
  'permission-evaluator': {
    user: 'permission-evaluator',
    passwordVariable: 'TOOLGATE_NATS_EVALUATOR_PASSWORD',
  },
  'tool-executor': { user: 'tool-executor', passwordVariable: 'TOOLGATE_NATS_EXECUTOR_PASSWORD' },
  journal: { user: 'journal', passwordVariable: 'TOOLGATE_NATS_JOURNAL_PASSWORD' },
  worktree: { user: 'worktree', passwordVariable: 'TOOLGATE_NATS_WORKTREE_PASSWORD' },
} as const;
export type ServiceUser = keyof typeof SERVICE_USERS;

/** Removes `<name> { … }` (balanced braces) at the start of a line; throws if it is not there. */
function withoutBlock(text: string, name: string): string {
  const start = text.search(new RegExp(`^${name}\\s*\\{`, 'm'));
  if (start < 0) throw new Error(`nats.conf has no ${name} block`);
  let depth = 0;
  for (let i = text.indexOf('{', start); i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) return text.slice(0, start) + text.slice(i + 1);
  }
  throw new Error(`nats.conf: the ${name} block does not close`);
}

/** Removes the top-level `<key>: …` line; throws if it is not there. */
function withoutSetting(text: string, key: string): string {
  const line = new RegExp(`^${key}:.*\\n`, 'm');
  if (!line.test(text)) throw new Error(`nats.conf has no ${key}`);
  return text.replace(line, '');
}

/**
 * The shipped configuration as one node on a laptop: the same accounts, users and permissions,
 * JetStream and limits, without what only a cluster node in a pod has — the cluster block (routes
 * to the other nodes), `server_name` (the pod's name) and the `pid_file` (a fixed path) — and with
 * the JetStream store in `where.storeDir`, the monitoring port on `where.httpPort` and the log in
 * `where.logFile` (the listening port is the command line's). Everything else is the shipped text,
 * byte for byte; each change fails loudly when the shipped file no longer has what it changes.
 */
export function singleNodeConfig(
  shipped: string,
  where: { storeDir: string; logFile: string; httpPort: number },
): string {
  let text = withoutBlock(shipped, 'cluster');
  for (const key of ['server_name', 'pid_file']) text = withoutSetting(text, key);
  const replace = (setting: RegExp, value: string) => {
    if (!setting.test(text)) throw new Error(`nats.conf has no ${setting.source}`);
    text = text.replace(setting, `$1${value}`);
  };
  replace(/^(\s*store_dir:\s*).*$/m, JSON.stringify(where.storeDir));
  replace(/^(http_port:\s*).*$/m, String(where.httpPort));
  return `${text}\nlog_file: ${JSON.stringify(where.logFile)}\n`;
}

/** Every `$VARIABLE` the shipped configuration reads from its environment. */
export function configVariables(text: string): string[] {
  return [...new Set([...text.matchAll(/:\s*\$([A-Z][A-Z0-9_]*)/g)].map((m) => m[1]!))];
}

/** A nats-server running the shipped configuration as one node, with a password per user. */
export interface ShippedNats {
  server: NatsServerProcess;
  /** Each variable's value: the password of the user it belongs to. */
  passwords: Record<string, string>;
  /** The server's log so far (permission violations are logged there, naming the user). */
  log(): string;
  /** The monitoring endpoint (`/connz?auth=true` names each connection's user). */
  monitorUrl: string;
}

/** Starts nats-server 2.9 on the single-node form of deploy/nats/nats.conf, in `dir`. */
export async function startShippedNats(
  dir: string,
  transform: (config: string) => string = (c) => c,
): Promise<ShippedNats> {
  const shipped = readFileSync(SHIPPED_NATS_CONF, 'utf8');
  const logFile = path.join(dir, 'nats.log');
  const configFile = path.join(dir, 'nats.conf');
  const passwords = Object.fromEntries(
    configVariables(shipped).map((v) => [v, `pw-${v.toLowerCase()}-${process.pid}`]),
  );
  const server = await startNatsServer({ configFile, env: passwords, start: false });
  const httpPort = await freePort();
  await writeFile(
    configFile,
    transform(singleNodeConfig(shipped, { storeDir: server.storeDir, logFile, httpPort })),
  );
  await server.start();
  return {
    server,
    passwords,
    monitorUrl: `http://127.0.0.1:${httpPort}`,
    log: () => {
      try {
        return readFileSync(logFile, 'utf8');
      } catch {
        return '';
      }
    },
  };
}

/**
 * The signing variables of `identity` as a deployment sets them (`toolgate keys generate`): its own
 * private key, every identity's public key, and keys required (no development keyring).
 */
export function signingEnv(keys: KeySet, identity: ServiceIdentity): NodeJS.ProcessEnv {
  return {
    TOOLGATE_SIGNING_KEY: keys.privateKeys[identity],
    TOOLGATE_SIGNING_PUBLIC_KEYS: JSON.stringify(keys.publicKeys),
    TOOLGATE_REQUIRE_SIGNING_KEYS: 'true',
  };
}

/**
 * Every service's options from `env`, connected to `nats` as `service`'s user and signing with
 * `service`'s key from `keys`.
 */
export function optionsAsUser(
  nats: ShippedNats,
  env: NodeJS.ProcessEnv,
  keys: KeySet,
  service: ServiceUser,
): AllInOneOptions {
  const { user, passwordVariable } = SERVICE_USERS[service];
  return loadAllInOneOptions({
    ...env,
    ...signingEnv(keys, service),
    NATS_URL: nats.server.url,
    NATS_USER: user,
    NATS_PASSWORD: nats.passwords[passwordVariable],
  });
}

/** The five services in this process, each connected as its own NATS user. */
export interface ServicesAsUsers {
  all: AllInOne;
  gatewayUrl: string;
  stop(): Promise<void>;
}

/**
 * Starts every service as the all-in-one does (journal first, gateway last), each with its own
 * user's credentials (`NATS_USER`, `NATS_PASSWORD`) and its own signing key on top of `env`.
 */
export async function startServicesAsUsers(
  nats: ShippedNats,
  env: NodeJS.ProcessEnv,
  keys: KeySet,
): Promise<ServicesAsUsers> {
  const as = (service: ServiceUser) => optionsAsUser(nats, env, keys, service);
  const options = {
    gateway: as('gateway').gateway,
    evaluator: as('permission-evaluator').evaluator,
    executor: as('tool-executor').executor,
    journal: as('journal').journal,
    worktree: as('worktree').worktree,
    logger: false as const,
  };
  const all = await startAllInOne(options);
  return { all, gatewayUrl: all.gateway.url, stop: () => all.stop() };
}

/**
 * The event types each user may publish (and only those), read off the code's producers: each
 * type's signing producers (`EVENT_SIGNING`), by the user named after the identity.
 */
export const PRODUCES: Record<string, readonly JournalEventType[]> = Object.fromEntries(
  [...Object.keys(SERVICE_USERS), 'ops', 'team-acme'].map((user) => [
    user,
    JOURNAL_EVENT_TYPES.filter((type) =>
      (EVENT_SIGNING[type].producers as readonly string[]).includes(user),
    ),
  ]),
);

/** How a JetStream publish ended: `refused` (permissions), `stored`, or the error's name. */
export async function publish(nc: NatsConnection, subject: string): Promise<string> {
  return jetstream(nc)
    .publish(subject, new TextEncoder().encode('{}'))
    .then(
      () => 'stored',
      (err: unknown) => (isPermissionViolation(err) ? 'refused' : (err as Error).name),
    );
}

/** The permission violations in the server's log: `<user> <Publish|Subscription> <subject>`. */
export function violations(log: string): string[] {
  return [...log.matchAll(/(Publish|Subscription) Violation - User "([^"]+)", Subject "([^"]+)"/g)]
    .map((m) => `${m[2]} ${m[1]} ${m[3]}`)
    .sort();
}

/** `toolgate <argv>` in process as the operator (`ops`, its password and signing key). */
export function runCliAsOps(
  nats: ShippedNats,
  keys: KeySet,
  argv: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<CliRun> {
  return runCliCaptured(argv, {
    NATS_URL: nats.server.url,
    TOOLGATE_PREFIX: 'toolgate',
    NATS_USER: 'ops',
    NATS_PASSWORD: nats.passwords.TOOLGATE_NATS_OPS_PASSWORD!,
    ...signingEnv(keys, ServiceIdentity.Ops),
    ...env,
  });
}

/**
 * Connections as the configuration's users ({@link connectAs}), kept to be closed together in a
 * spec's `afterAll`. `nats` is read at each connection: the server a spec starts in `beforeAll`.
 */
export class UserConnections {
  private readonly open: NatsConnection[] = [];

  constructor(private readonly nats: () => ShippedNats) {}

  async as(
    user: string,
    passwordVariable: string,
    extra: { inboxPrefix?: string } = {},
  ): Promise<NatsConnection> {
    const nc = await connectAs(this.nats(), user, passwordVariable, extra);
    this.open.push(nc);
    return nc;
  }

  async closeAll(): Promise<void> {
    for (const nc of this.open.splice(0)) await nc.close().catch(() => undefined);
  }
}

/** A connection to `nats` as `user`, with the password of `passwordVariable`. */
export function connectAs(
  nats: ShippedNats,
  user: string,
  passwordVariable: string,
  extra: { inboxPrefix?: string } = {},
): Promise<NatsConnection> {
  return connect({
    servers: nats.server.url,
    user,
    pass: nats.passwords[passwordVariable],
    name: `test-${user}`,
    ...extra,
  });
}
