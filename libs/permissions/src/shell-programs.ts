/**
 * What the shell matcher knows about particular programs, as data. These tables only ever make
 * matching stricter: they decide which segments are unmatchable, which segments poison the ones
 * after them, which programs run another program (so deny and ask patterns also look at what they
 * run), which options take a command, a pager, a preprocessor, a script or an output file, and
 * which tokens a wildcard in an allow pattern may never stand for. The logic that reads them is in
 * `shell-argv-analysis.ts`; the sources each entry answers are cited in
 * `shell-bypass-corpus.spec.ts`.
 */

/** Reserved words and compound-command openers: a segment starting with one is not a simple command. */
export const SHELL_KEYWORDS: ReadonlySet<string> = new Set([
  'if',
  'then',
  'else',
  'elif',
  'fi',
  'for',
  'while',
  'until',
  'do',
  'done',
  'case',
  'esac',
  'select',
  'function',
  'in',
  '{',
  '}',
  '[[',
  ']]',
  '((',
  '!',
  'coproc',
]);

/** Programs that evaluate a string as shell code (or arithmetic) at some later point. */
export const CODE_EVALUATORS: ReadonlySet<string> = new Set([
  'eval',
  'trap',
  'let',
  'fc',
  'bind',
  'complete',
  'compgen',
]);

/**
 * Builtins that change the shell's own state (variables, functions, aliases, options), so the
 * segments after them no longer mean what they say: `export PATH=/tmp/evil; ls`.
 */
export const ENVIRONMENT_CHANGERS: ReadonlySet<string> = new Set([
  'export',
  'declare',
  'typeset',
  'local',
  'readonly',
  'alias',
  'unalias',
  'set',
  'shopt',
  'enable',
  'hash',
  'source',
  '.',
  'read',
  'mapfile',
  'readarray',
  'getopts',
  'unset',
]);

/**
 * Programs that run another program given in their arguments (protected-path checks skip them and
 * look at what they run). The program table says how each finds that program.
 */
export const WRAPPERS: ReadonlySet<string> = new Set([
  'env',
  'command',
  'builtin',
  'exec',
  'nice',
  'nohup',
  'time',
  'timeout',
  'stdbuf',
  'xargs',
  'sudo',
  'doas',
  'su',
  'runuser',
  'pkexec',
  'setsid',
  'ionice',
  'chrt',
  'taskset',
  'numactl',
  'flock',
  'chroot',
  'unshare',
  'nsenter',
  'strace',
  'ltrace',
  'valgrind',
  'unbuffer',
  'firejail',
  'bwrap',
  'systemd-run',
  'caffeinate',
  'watch',
  'script',
  'entr',
  'parallel',
  'find',
  'busybox',
  'toybox',
  'proxychains',
  'proxychains4',
  'torsocks',
  'catchsegv',
  'faketime',
  'fakeroot',
  'cpulimit',
  'prlimit',
  'sg',
  'newgrp',
  'npx',
  'pnpx',
  'bunx',
  'uvx',
  'pipx',
  'dbus-launch',
  'xvfb-run',
  'ssh',
  'scl',
  'with-contenv',
  's6-setuidgid',
  'setpriv',
  'chpst',
  'daemonize',
  'start-stop-daemon',
  'ld.so',
  'socat',
  'perf',
  'uftrace',
  'rr',
  'setarch',
  'linux32',
  'linux64',
  'i386',
  'x86_64',
  'uname26',
  'capsh',
  'ssh-agent',
  'gpg-agent',
  'dbus-run-session',
  'chronic',
  'ifne',
  'eatmydata',
  'nocache',
  'trickle',
  'cgexec',
  'runcon',
  'sshpass',
  'proot',
  'fakechroot',
  'tsp',
  'srun',
  'mpirun',
  'mpiexec',
  'lldb',
  'hyperfine',
  'direnv',
  'cross-env',
  'dotenv',
]);

/**
 * What an option does, which also says whether it takes a value:
 * - `flag`, `value`, `optional`: harmless; no value, one value (attached or the next word), a value
 *   only when attached (`-iSUFFIX`, `--opt=VALUE`);
 * - `hazard`, `hazard-value`, `hazard-optional`: makes the program run or change something its
 *   allow pattern does not say (`find -delete`, `git --git-dir=D`); a wildcard never stands for it;
 * - `output`, `output-optional`: the value is a file the program writes;
 * - `command`, `command-optional`: the value is a command line the program runs (a pager, a
 *   preprocessor, a remote shell), analysed like `sh -c`;
 * - `code`: the value is code in the program's own language, which the matcher cannot read;
 * - `script`, `script-optional`: the value names a file of code or configuration that decides what
 *   runs, which the matcher cannot read either;
 * - `stdin`: no value; the program then reads code from its standard input.
 */
export type OptionKind =
  | 'flag'
  | 'value'
  | 'optional'
  | 'hazard'
  | 'hazard-value'
  | 'hazard-optional'
  | 'output'
  | 'output-optional'
  | 'command'
  | 'command-optional'
  | 'code'
  | 'script'
  | 'script-optional'
  | 'stdin';

/** What an option with a classifier does, decided on its value. */
export type OptionEffect =
  | { readonly kind: 'none' | 'hazard' }
  | { readonly kind: 'command'; readonly command: string }
  | { readonly kind: 'output'; readonly path: string }
  | { readonly kind: 'opaque'; readonly reason: string };

/** An option whose effect depends on its value (`git -c KEY=VALUE`, `ssh -o Key=Value`). */
export interface OptionClassifier {
  /** 1: a value, attached or the next word; `attached`: only an attached one (may be empty). */
  readonly takes: 1 | 'attached';
  readonly classify: (value: string) => OptionEffect;
}

/**
 * What the analysis does with a program's operands beyond its options. Each names a routine in
 * `shell-argv-analysis.ts`:
 * - `shell`: `sh`/`bash`/...: `-c STRING`, a script file, or commands read from stdin;
 * - `script`: an interpreter: the first operand is a script (as allowed as any program), and
 *   without one (or with `-`) the program reads code from stdin;
 * - `source`: `source FILE` / `. FILE`;
 * - `sed`, `awk`: the script (first operand unless given by option) is scanned for the commands
 *   that run programs or write files;
 * - `find`: the expression (`-exec ... ;`, `-fprint FILE`, `-delete`);
 * - `dd`: `of=FILE`; `all-output`, `last-output`, `second-output`: which operands are written;
 * - `editor`: `+COMMAND` operands run an editor or pager command (`vim +'!cmd'`, `less +…`);
 * - `env`: `NAME=VALUE` operands, then the program; `join`: the operands are joined into a command
 *   line (`watch`, `ssh HOST ...`, `parallel`); `docker`: every suffix may be the program run;
 * - `stdin-code`: the program reads commands in its own language from stdin (`ed`, `ex`, `at`);
 * - `socat`: its two addresses (`EXEC:`/`SYSTEM:` run a command, `CREATE:`/`OPEN:` write a file);
 * - `capsh`: `--` passes the rest to a shell (`capsh -- -c CMD`), `==` to capsh again;
 * - `commands`: every operand is a command line (`hyperfine CMD...`, `concurrently CMD...`);
 * - `git`, `npm`, `make`, `gh`, `tar`, `xargs`, `sudo`, `all-code`: see their routines.
 */
export type OperandRule =
  | 'shell'
  | 'script'
  | 'source'
  | 'sed'
  | 'awk'
  | 'find'
  | 'dd'
  | 'all-output'
  | 'last-output'
  | 'second-output'
  | 'editor'
  | 'env'
  | 'join'
  | 'ssh'
  | 'docker'
  | 'git'
  | 'npm'
  | 'make'
  | 'gh'
  | 'tar'
  | 'xargs'
  | 'sudo'
  | 'su'
  | 'all-code'
  | 'stdin-code'
  | 'socat'
  | 'capsh'
  | 'commands';

/** One program's entry in {@link PROGRAMS}. */
export interface ProgramSpec {
  /**
   * Options by spelling (`'-o --output'`: every spelling of one option, the first is its name):
   * `-x` a short option (clusters like `-abc` are split), `--name` a long one (`--name=V` and
   * `--name V`), `-name` a single-dash long one (`find -exec`, `zip -TT`).
   */
  readonly options?: Readonly<Record<string, OptionKind | OptionClassifier>>;
  /** GNU getopt_long: options may follow operands, and long options may be abbreviated. */
  readonly gnu?: boolean;
  /**
   * A wrapper: it runs the program named after its options and this many operands of its own
   * (`timeout DURATION PROGRAM...`: 1). The program is analysed as if it stood alone.
   */
  readonly runs?: number;
  /** Every option is listed: an unknown one makes the segment ask (it could be hiding a value). */
  readonly strict?: boolean;
  /** The language of the program's inline code, for reasons (`python`). */
  readonly language?: string;
  readonly operands?: OperandRule;
  /** Subcommands with options of their own (`npm exec`, `git log`): the first operand names one. */
  readonly subcommands?: Readonly<Record<string, ProgramSpec>>;
  /** A wrapper that starts a shell reading commands from stdin when it is given no program. */
  readonly shellWithout?: true;
  /**
   * The program runs code the command line does not show: a Makefile's recipes, package.json
   * scripts, a package it downloads, the files of a directory, test files. Deny-list policies ask
   * (any deny or ask rule could match what it runs); an allow pattern may still allow it.
   */
  readonly unseen?: UnseenSpec;
}

/** When a program runs code the command line does not show (see {@link ProgramSpec.unseen}). */
export interface UnseenSpec {
  /** What runs, for reasons: `the recipes of a Makefile`. */
  readonly what: string;
  /** First operands (subcommands) after which it runs nothing of the kind (`npm view`). */
  readonly except?: RegExp;
  /** Options after which it runs nothing of the kind (`--version`, `make -n`). */
  readonly exceptOptions?: RegExp;
}

// Spellings shared by several entries.
const HELP = { '-h --help': 'flag', '--version': 'flag' } as const;

/** `ssh -o Key=Value` (and `scp`, `sftp`, `rsync -e`): the keys whose value is a command. */
const SSH_OPTION: OptionClassifier = {
  takes: 1,
  classify: (value) => {
    const m = /^\s*([A-Za-z]+)\s*[= ]\s*(.*)$/s.exec(value);
    if (m === null) return { kind: 'hazard' };
    const key = m[1]!.toLowerCase();
    if (key === 'proxycommand' || key === 'localcommand' || key === 'remotecommand')
      return { kind: 'command', command: m[2]! };
    if (key === 'knownhostscommand') return { kind: 'command', command: m[2]! };
    if (
      key === 'match' ||
      key === 'include' ||
      key === 'pkcs11provider' ||
      key === 'securitykeyprovider'
    )
      return { kind: 'opaque', reason: `ssh option '${m[1]}' loads code or configuration` };
    return { kind: 'hazard' };
  },
};

/**
 * `git -c KEY=VALUE` and `git config KEY VALUE`: what a configuration key makes git do. Keys whose
 * value is a command run through the shell are analysed; keys that point git at code elsewhere
 * (hooks, included files, templates) cannot be; the rest are options a wildcard never stands for.
 */
export function gitConfigEffect(key: string, value: string | undefined): OptionEffect {
  // Section and variable names are case-insensitive; a subsection (the middle part) is not.
  const dot = key.indexOf('.');
  const last = key.lastIndexOf('.');
  const section = (dot < 0 ? key : key.slice(0, dot)).toLowerCase();
  const name = (last < 0 ? '' : key.slice(last + 1)).toLowerCase();
  const sub = dot >= 0 && last > dot;
  const normal = sub ? `${section}.*.${name}` : `${section}.${name}`;
  if (value === undefined) {
    // `git -c KEY` sets KEY to true: harmless unless it names code elsewhere.
    return GIT_OPAQUE_KEYS.test(normal)
      ? { kind: 'opaque', reason: `git configuration '${key}' runs code the matcher cannot read` }
      : { kind: 'hazard' };
  }
  if (section === 'alias') {
    // `!cmd` runs a shell command; anything else is more git arguments.
    const body = value.trimStart();
    return body.startsWith('!')
      ? { kind: 'command', command: body.slice(1) }
      : { kind: 'command', command: `git ${body}` };
  }
  if (normal === 'core.fsmonitor') {
    return /^(?:true|false|yes|no|on|off|1|0|)$/i.test(value)
      ? { kind: 'hazard' }
      : { kind: 'command', command: value };
  }
  if (normal === 'credential.helper' || normal === 'credential.*.helper') {
    const v = value.trimStart();
    if (v.startsWith('!')) return { kind: 'command', command: v.slice(1) };
    return { kind: 'command', command: v.startsWith('/') ? v : `git-credential-${v}` };
  }
  if (normal === 'submodule.*.update' && value.trimStart().startsWith('!'))
    return { kind: 'command', command: value.trimStart().slice(1) };
  if (GIT_COMMAND_KEYS.test(normal)) return { kind: 'command', command: value };
  if (GIT_OPAQUE_KEYS.test(normal) || /^(?:cmd|command|program|hook|driver|helper)$/.test(name))
    return {
      kind: 'opaque',
      reason: `git configuration '${key}' runs code the matcher cannot read`,
    };
  return { kind: 'hazard' };
}

/** Configuration keys (normalised: `section.*.name`) whose value is a shell command. */
const GIT_COMMAND_KEYS =
  /^(?:core\.(?:pager|editor|sshcommand|askpass|gitproxy)|pager\.[^.]+|pager\.\*\.[^.]+|sequence\.editor|diff\.external|diff\.\*\.(?:command|textconv)|difftool\.\*\.cmd|mergetool\.\*\.cmd|merge\.\*\.driver|filter\.\*\.(?:clean|smudge|process)|gpg\.program|gpg\.\*\.program|gpg\.ssh\.defaultkeycommand|uploadpack\.packobjectshook|interactive\.difffilter|man\.\*\.cmd|man\.\*\.path|browser\.\*\.cmd|browser\.\*\.path|web\.browser|sendemail\.(?:sendmailcmd|tocmd|cccmd|smtpserver|headercmd)|sendemail\.\*\.(?:sendmailcmd|tocmd|cccmd|smtpserver)|remote\.\*\.(?:uploadpack|receivepack)|trailer\.\*\.(?:command|cmd)|instaweb\.httpd|core\.fsmonitor)$/;

/** Configuration keys that make git run code from files or programs the command does not show. */
const GIT_OPAQUE_KEYS =
  /^(?:core\.(?:hookspath|worktree|attributesfile|excludesfile)|include\.path|includeif\.\*\.path|init\.templatedir|protocol\.allow|protocol\.\*\.allow|url\.\*\.(?:insteadof|pushinsteadof)|http\.proxy|http\.\*\.proxy|remote\.\*\.(?:proxy|vcs)|gc\.auto.*|ssh\.variant|core\.sshcommand)$/;

/** `git -c KEY=VALUE`, `git clone -c KEY=VALUE`. */
const GIT_CONFIG_OPTION: OptionClassifier = {
  takes: 1,
  classify: (kv) => {
    const eq = kv.indexOf('=');
    return gitConfigEffect(eq < 0 ? kv : kv.slice(0, eq), eq < 0 ? undefined : kv.slice(eq + 1));
  },
};

/** `git --config-env=KEY=ENVVAR`: the value comes from the environment, which is not visible. */
const GIT_CONFIG_ENV_OPTION: OptionClassifier = {
  takes: 1,
  classify: (kv) => {
    const key = kv.slice(0, Math.max(0, kv.indexOf('=')));
    const effect = gitConfigEffect(key, 'x');
    return effect.kind === 'hazard'
      ? effect
      : {
          kind: 'opaque',
          reason: `git configuration '${key}' is taken from an environment variable`,
        };
  },
};

/** `env -S STRING`: STRING is split into env's own arguments (options, assignments, program). */
const ENV_SPLIT_STRING: OptionClassifier = {
  takes: 1,
  classify: (value) => ({ kind: 'command', command: `env ${value}` }),
};

/** Options of the git commands that show diffs and logs. */
const GIT_DIFF_OPTIONS = {
  '--output': 'output',
  '--ext-diff': 'hazard',
  '--textconv': 'hazard',
  '-O': 'value',
} as const;

/** `git --exec-path=DIR` runs git's helper programs from DIR; a bare `--exec-path` prints it. */
const GIT_EXEC_PATH: OptionClassifier = {
  takes: 'attached',
  classify: (dir) =>
    dir === ''
      ? { kind: 'none' }
      : { kind: 'opaque', reason: `git runs its helper programs from '${dir}' (--exec-path)` },
};

/** `git send-email --smtp-server=X`: an absolute path is a program run instead of an SMTP server. */
const SMTP_SERVER: OptionClassifier = {
  takes: 1,
  classify: (server) =>
    server.startsWith('/') ? { kind: 'command', command: server } : { kind: 'hazard' },
};

/** `tar --checkpoint-action=ACTION`: `exec=COMMAND` runs a command. */
const TAR_CHECKPOINT_ACTION: OptionClassifier = {
  takes: 1,
  classify: (action) =>
    action.startsWith('exec=') ? { kind: 'command', command: action.slice(5) } : { kind: 'hazard' },
};

/** The options of python and its relatives. */
const PYTHON: ProgramSpec = {
  language: 'python',
  operands: 'script',
  options: {
    '-c': 'code',
    '-m': 'hazard-value',
    '-W': 'value',
    '-X': 'value',
    '-i': 'stdin',
    '--check-hash-based-pycs': 'value',
    '-b -B -d -E -I -O -P -q -R -s -S -u -v -V -x -h -? --help --version --help-env --help-xoptions --help-all':
      'flag',
  },
  strict: true,
};

/** The options of node and the runtimes that copy its command line. */
const NODE: ProgramSpec = {
  language: 'JavaScript',
  operands: 'script',
  options: {
    '-e --eval': 'code',
    '-p --print': 'code',
    '-r --require': 'hazard-value',
    '--import --loader --experimental-loader': 'hazard-value',
    '-i --interactive': 'stdin',
    '--run': 'hazard-value',
    '-C --conditions --input-type --title --env-file --env-file-if-exists --stack-size --max-old-space-size --disable-warning --redirect-warnings --watch-path --test-name-pattern --test-reporter --test-reporter-destination --test-concurrency --test-shard --test-timeout':
      'value',
    '-c --check --test --watch --no-warnings --enable-source-maps --trace-warnings --experimental-vm-modules --expose-gc --no-deprecation --throw-deprecation --preserve-symlinks -v --version -h --help':
      'flag',
  },
};

/** `npm exec` / `npm x`: runs the program after its options (or after `--`). */
const NPM_EXEC: ProgramSpec = {
  runs: 0,
  options: {
    '-c --call': 'command',
    '-p --package': 'hazard-value',
    '-y --yes --no --ws --workspaces --include-workspace-root': 'flag',
    '-w --workspace': 'value',
  },
};

/** Wrappers that take no options and no operands of their own before the program they run. */
const PLAIN_WRAPPER: ProgramSpec = { runs: 0, strict: true, options: HELP };

/** Wrappers whose own options are not listed: every suffix of their arguments may be the program. */
const LOOSE_WRAPPER: ProgramSpec = { runs: 0, strict: false };

const VERSION_OR_HELP = /^(?:-v|-V|--version|-h|--help)$/;

/** npm and pnpm subcommands that run no script and no package binary. */
const NPM_RUNS_NOTHING =
  /^(?:|view|v|info|show|ls|list|la|ll|outdated|config|c|get|help|help-search|whoami|search|s|se|find|root|prefix|bin|ping|explain|why|query|fund|token|login|logout|adduser|owner|access|team|org|profile|star|stars|unstar|docs|home|bugs|repo|doctor|cache|dist-tag|deprecate|hook|sbom|diff|pkg|set-script|completion)$/;

/** What `npx` and its relatives run. */
const PACKAGE_BINARY: UnseenSpec = {
  what: 'a package binary from node_modules/.bin or the registry',
  exceptOptions: VERSION_OR_HELP,
};

/** A tool that runs the project's own code: build files, scripts, hooks, tests. */
const projectRunner = (what: string, except?: RegExp): ProgramSpec => ({
  unseen: { what, exceptOptions: VERSION_OR_HELP, ...(except === undefined ? {} : { except }) },
});

/** `setarch ARCH [options] [program]`; `linux64 [options] [program]` has the architecture built in. */
const SETARCH_OPTIONS = {
  '-R --addr-no-randomize -F --fdpic-funcptrs -Z --mmap-page-zero -L --addr-compat-layout -X --read-implies-exec -B --32bit -I --short-inode -S --whole-seconds -T --sticky-timeouts -3 --3gb --4gb --uname-2.6 -v --verbose --list':
    'flag',
  ...HELP,
  '-V': 'flag',
} as const;

/** A dynamic loader run as a program (`/lib64/ld-linux-x86-64.so.2 /bin/rm x`) runs its operand. */
const DYNAMIC_LOADER: ProgramSpec = {
  runs: 0,
  strict: true,
  options: {
    '--preload --audit --library-path': 'script',
    '--argv0 --glibc-hwcaps-prepend --glibc-hwcaps-mask --inhibit-rpath': 'value',
    '--list --verify --inhibit-cache --list-tunables --list-diagnostics --help --version': 'flag',
  },
};

/** `perf record`, `perf stat`, `perf trace`, ...: run the program after their options. */
const PERF_RUNS: ProgramSpec = {
  runs: 0,
  strict: false,
  options: {
    '-o --output': 'output',
    '-e --event -F --freq -c --count -p --pid -t --tid -C --cpu -G --cgroup -m --mmap-pages -u --uid --call-graph -r --repeat -I --interval-print -x --field-separator':
      'value',
  },
};

/** An AI coding agent's CLI: what it runs is chosen by a model from a prompt. */
const AGENT_CLI: ProgramSpec = { operands: 'all-code', language: 'agent-chosen' };

/**
 * The program table, by basename. Each entry lists a program's options that matter (the options
 * that run code, write files or take a value that could be mistaken for an operand) and what its
 * operands are; for wrappers (`runs`) and interpreters it lists them all (`strict`).
 */
const PROGRAMS: Readonly<Record<string, ProgramSpec>> = {
  // Shells: `-c STRING`, a script file, or commands on stdin. Options are parsed by the routine.
  sh: { operands: 'shell', language: 'shell' },
  // Interpreters of other languages.
  python: PYTHON,
  pypy: PYTHON,
  node: NODE,
  nodejs: NODE,
  tsx: NODE,
  'ts-node': NODE,
  bun: {
    ...NODE,
    subcommands: {
      x: { runs: 0, strict: false, options: { '--bun': 'flag' } },
      exec: { operands: 'join', language: 'shell' },
      run: { operands: 'script', language: 'JavaScript' },
    },
    unseen: {
      what: 'package.json scripts, tests or a package binary',
      except: /^(?:|pm|info|outdated|upgrade|completions|help)$|\.[cm]?[jt]sx?$/,
      exceptOptions: VERSION_OR_HELP,
    },
  },
  deno: {
    language: 'JavaScript',
    subcommands: {
      eval: { operands: 'all-code', language: 'JavaScript' },
      repl: { operands: 'all-code', language: 'JavaScript' },
    },
    unseen: {
      what: 'scripts, tasks or tests',
      except: /^(?:|eval|repl|fmt|lint|info|doc|check|types|upgrade|completions|help)$/,
      exceptOptions: VERSION_OR_HELP,
    },
  },
  perl: {
    language: 'perl',
    operands: 'script',
    strict: true,
    options: {
      '-e -E': 'code',
      '-M -m': 'code',
      '-i': 'hazard-optional',
      '-I': 'value',
      '-x': 'optional',
      '-d': 'hazard-optional',
      '-D -0 -C -l -V': 'optional',
      '-F': 'value',
      '-a -c -h -n -p -s -S -t -T -u -U -v -w -W -X': 'flag',
    },
  },
  ruby: {
    language: 'ruby',
    operands: 'script',
    options: {
      '-e': 'code',
      '-r --require': 'hazard-value',
      '-I -C -E -F --encoding --external-encoding --internal-encoding --dump --enable --disable':
        'value',
      '-i': 'hazard-optional',
      '-x -0 -l -W': 'optional',
      '-a -c -d -n -p -s -S -v -w -y -h --help --version --verbose --yjit --jit': 'flag',
    },
  },
  php: {
    language: 'PHP',
    operands: 'script',
    options: {
      '-r -R -B -E': 'code',
      '-F -z': 'script',
      '-f': 'value',
      '-d -c -S': 'hazard-value',
      '-t --rf --rc --re --rz --ri': 'value',
      '-a': 'stdin',
      '-n -l -s -w -i -m -v -h -H -q -e --ini': 'flag',
    },
  },
  lua: {
    language: 'Lua',
    operands: 'script',
    options: { '-e -j': 'code', '-l': 'hazard-value', '-i': 'stdin', '-v -E -W -b -O': 'flag' },
  },
  osascript: {
    language: 'AppleScript',
    operands: 'script',
    options: { '-e': 'code', '-l -s': 'value', '-i': 'stdin' },
  },
  Rscript: { language: 'R', operands: 'script', options: { '-e': 'code' } },
  R: {
    language: 'R',
    operands: 'script',
    options: { '-e': 'code', '-f --file': 'script', '--args': 'flag' },
  },
  julia: {
    language: 'Julia',
    operands: 'script',
    options: { '-e --eval -E --print': 'code', '-L --load': 'script', '-i': 'stdin' },
  },
  groovy: { language: 'Groovy', operands: 'script', options: { '-e': 'code' } },
  scala: { language: 'Scala', operands: 'script', options: { '-e': 'code' } },
  elixir: {
    language: 'Elixir',
    operands: 'script',
    options: { '-e --eval --rpc-eval': 'code', '-r -pr': 'script' },
  },
  erl: {
    language: 'Erlang',
    options: { '-eval -s -run -S': 'code' },
    operands: 'all-code',
  },
  pwsh: {
    language: 'PowerShell',
    operands: 'all-code',
    options: { '-c -command -ec -encodedcommand -cwa -commandwithargs': 'code' },
  },
  tclsh: { language: 'Tcl', operands: 'script', options: { '-encoding': 'value' } },
  expect: {
    language: 'Tcl',
    operands: 'script',
    options: { '-c': 'code', '-f': 'script', '-i': 'stdin', '-b -d -D -n -N -v': 'flag' },
  },
  irb: { language: 'ruby', operands: 'all-code' },
  psql: {
    language: 'SQL',
    operands: 'all-code',
    options: {
      '-c --command': 'code',
      '-f --file': 'script',
      '-o --output -L --log-file': 'output',
    },
  },
  mysql: {
    language: 'SQL',
    operands: 'all-code',
    options: { '-e --execute': 'code', '--tee': 'output' },
  },
  sqlite3: {
    language: 'SQL',
    operands: 'all-code',
    options: { '-cmd': 'code', '-init': 'script' },
  },
  gdb: {
    language: 'gdb',
    operands: 'all-code',
    options: {
      '-ex --ex -eval-command --eval-command -iex -init-eval-command': 'code',
      '-x --x -command --command -ix -init-command': 'script',
    },
  },
  dc: {
    language: 'dc',
    operands: 'all-code',
    options: { '-e --expression': 'code', '-f --file': 'script' },
  },
  // Editors whose options run editor commands (`:!cmd`).
  vim: {
    language: 'Vim',
    operands: 'editor',
    options: {
      '-c --cmd': 'code',
      '-S -u -U -s': 'script',
      '-w -W': 'output',
      '-i -T -t -q -r': 'value',
      // Ex mode: commands (`!cmd` among them) are read from standard input.
      '-e -E': 'stdin',
    },
  },
  emacs: {
    language: 'Emacs Lisp',
    gnu: true,
    options: {
      '--eval -eval -f --funcall -funcall': 'code',
      '-l --load -load --script -script -x': 'script',
      '--batch -batch -q -Q -nw --no-init-file': 'flag',
    },
  },
  emacsclient: { language: 'Emacs Lisp', options: { '-e --eval': 'code', '-s -f': 'value' } },
  // Stream editors and text tools: the script is scanned.
  sed: {
    gnu: true,
    operands: 'sed',
    options: {
      '-e --expression': 'value',
      '-f --file': 'script',
      '-i --in-place': 'hazard-optional',
      '-l --line-length': 'value',
      '--sandbox': 'flag',
      '-n --quiet --silent -E -r --regexp-extended -s --separate -u --unbuffered -z --null-data -b --binary --posix --debug --follow-symlinks':
        'flag',
      ...HELP,
    },
  },
  awk: {
    gnu: true,
    operands: 'awk',
    options: {
      '-f --file -E --exec -i --include -l --load': 'script',
      '-e --source': 'value',
      '-v --assign -F --field-separator': 'value',
      '-o --pretty-print -p --profile -d --dump-variables': 'output-optional',
      '-D --debug': 'script-optional',
      '-W': 'script',
      '-b -c -C -g -h -L -M -n -N -O -P -r -s -S -t -V --characters-as-bytes --traditional --posix --sandbox --lint --optimize --bignum --csv --re-interval --non-decimal-data --use-lc-numeric --copyright --gen-pot':
        'flag',
    },
  },
  find: { operands: 'find', options: { '-D': 'value', '-O': 'optional', '-H -L -P': 'flag' } },
  sort: {
    gnu: true,
    options: {
      '-o --output': 'output',
      '--compress-program': 'command',
      '-k --key -t --field-separator -T --temporary-directory -S --buffer-size --batch-size --parallel --random-source --files0-from --sort':
        'value',
      '-b -d -f -g -h -i -M -n -R -r -V -c -C -m -s -u -z --check --merge --stable --unique --reverse --numeric-sort --human-numeric-sort --version-sort --random-sort --month-sort --general-numeric-sort --ignore-case --dictionary-order --ignore-leading-blanks --ignore-nonprinting --zero-terminated --debug':
        'flag',
      ...HELP,
    },
  },
  uniq: {
    gnu: true,
    operands: 'second-output',
    options: {
      '-f -s -w --skip-fields --skip-chars --check-chars --group --all-repeated': 'value',
    },
  },
  rg: {
    gnu: true,
    options: {
      '--pre': 'command',
      '--pre-glob': 'hazard-value',
      '--hostname-bin': 'command',
      '-z --search-zip': 'hazard',
      '-e --regexp -f --file -g --glob --iglob -t --type -T --type-not --type-add --type-clear -m --max-count -A -B -C --after-context --before-context --context -j --threads -M --max-columns -d --max-depth --max-filesize -E --encoding -r --replace --colors --color --sort --sortr --path-separator --engine --ignore-file --context-separator --field-match-separator --field-context-separator --dfa-size-limit --regex-size-limit --generate':
        'value',
    },
  },
  grep: {
    gnu: true,
    options: {
      '-e --regexp -f --file -m --max-count -A -B -C --after-context --before-context --context --label --include --exclude --exclude-from --exclude-dir --color --colour -d --directories -D --devices --binary-files --group-separator':
        'value',
    },
  },
  tee: {
    gnu: true,
    operands: 'all-output',
    options: { '-a --append -i -p': 'flag', '--output-error': 'optional' },
  },
  dd: { operands: 'dd' },
  cp: {
    gnu: true,
    operands: 'last-output',
    options: {
      '-t --target-directory': 'output',
      '-S --suffix --backup --reflink --sparse --preserve --no-preserve': 'value',
    },
  },
  mv: {
    gnu: true,
    operands: 'last-output',
    options: { '-t --target-directory': 'output', '-S --suffix --backup': 'value' },
  },
  ln: {
    gnu: true,
    operands: 'last-output',
    options: { '-t --target-directory': 'output', '-S --suffix --backup': 'value' },
  },
  install: {
    gnu: true,
    operands: 'last-output',
    options: {
      '-t --target-directory': 'output',
      '-g --group -m --mode -o --owner -S --suffix --backup': 'value',
      '--strip-program': 'command',
    },
  },
  touch: {
    gnu: true,
    operands: 'all-output',
    options: { '-d --date -r --reference -t --time': 'value' },
  },
  truncate: { gnu: true, operands: 'all-output', options: { '-s --size -r --reference': 'value' } },
  patch: {
    gnu: true,
    options: {
      '-o --output': 'output',
      '-i --input -p --strip -d --directory -B --prefix -z --suffix -D --ifdef -F --fuzz -r --reject-file':
        'value',
    },
  },
  split: {
    gnu: true,
    options: {
      '--filter': 'command',
      '-a -b -C -l -n -t --suffix-length --bytes --line-bytes --lines --number --additional-suffix --separator':
        'value',
    },
  },
  csplit: { gnu: true, options: { '-f --prefix -b --suffix-format -n --digits': 'value' } },
  base64: { options: { '-o --output': 'output', '-i --input -w --wrap -b': 'value' } },
  xxd: { operands: 'second-output', options: { '-c -g -l -o -s -n -C -R': 'value' } },
  yq: { operands: 'all-code', options: { '-i --inplace': 'hazard', '--from-file': 'script' } },
  jq: {
    operands: 'all-code',
    options: {
      '-f --from-file': 'script',
      '--rawfile --slurpfile --arg --argjson --args --jsonargs --indent': 'value',
    },
  },
  bc: { operands: 'all-code' },
  // Pagers, manuals and viewers.
  less: {
    language: 'less',
    operands: 'editor',
    options: {
      '-o --log-file -O --LOG-FILE': 'output',
      '-k --lesskey-file --lesskey-src --lesskey-content': 'script',
      '-t --tag -T --tag-file -p --pattern -P --prompt -x --tabs -y --max-forw-scroll -z --window -b --buffers -h --max-back-scroll -j --jump-target -# --shift':
        'value',
    },
  },
  more: { language: 'more', operands: 'editor', options: { '-n --lines': 'value' } },
  man: {
    gnu: true,
    options: {
      '-P --pager': 'command',
      '-H --html': 'command-optional',
      '-X --gxditview': 'optional',
      '-C --config-file': 'script',
      '-p --preprocessor -M --manpath -S -s --sections -m --systems -L --locale -E --encoding -R --recode -e --extension -T --troff-device -r --prompt -I --regex --names-only --warnings':
        'value',
    },
  },
  // Archivers and transfer tools.
  tar: {
    gnu: true,
    operands: 'tar',
    options: {
      '-I --use-compress-program': 'command',
      '--to-command --rsh-command --rmt-command': 'command',
      '-F --info-script --new-volume-script': 'command',
      '--checkpoint-action': TAR_CHECKPOINT_ACTION,
      '--index-file -g --listed-incremental --volno-file': 'output',
      '-c --create -r --append -u --update -A --catenate --concatenate': 'flag',
      '-x --extract --get -t --list -d --diff --compare --delete -v --verbose -z --gzip -j --bzip2 -J --xz --zstd -a --auto-compress -O --to-stdout -k --keep-old-files -p --preserve-permissions':
        'flag',
      '-f --file': 'value',
      '-C --directory -T --files-from -X --exclude-from -b --blocking-factor -H --format -K --starting-file -L --tape-length -N --newer --after-date -V --label --owner --group --mode --mtime --transform --xform --exclude --suffix --record-size --strip-components --level --sparse-version --hole-detection --quoting-style --quote-chars --no-quote-chars --pax-option --warning --exclude-tag --exclude-tag-all --exclude-tag-under --add-file --owner-map --group-map --newer-mtime --occurrence --one-top-level --atime-preserve --backup --checkpoint --totals --set-mtime-format --xattrs-include --xattrs-exclude':
        'value',
    },
  },
  zip: {
    gnu: true,
    options: {
      '-TT --unzip-command': 'command',
      '-T --test': 'hazard',
      '-O --output-file': 'output',
      '-b --temp-path -n --suffixes -t --from-date -tt --before-date -x --exclude -i --include -P --password -Z --compression-method -s --split-size -sp -sb -sc -sv -ds -dd -du -dv -db -dc -dg -la -lf -li -lu -sf -so -su -UN -FS -MM -ws':
        'value',
    },
  },
  rsync: {
    gnu: true,
    options: {
      '-e --rsh --rsync-path': 'command',
      '--log-file --write-batch --only-write-batch': 'output',
      '--config --password-file': 'script',
      '-f --filter --exclude --include --exclude-from --include-from --files-from -T --temp-dir --backup-dir --suffix --chmod --out-format --log-file-format --compare-dest --copy-dest --link-dest --max-delete --max-size --min-size --partial-dir --timeout --contimeout --bwlimit --port --address --sockopts --block-size -B --checksum-choice --compress-choice --compress-level --skip-compress --usermap --groupmap --chown --read-batch --protocol --iconv --outbuf --info --debug --stderr --modify-window --remote-option -M':
        'value',
    },
  },
  ssh: {
    operands: 'ssh',
    options: {
      '-o': SSH_OPTION,
      '-F': 'script',
      '-I': 'script',
      '-E': 'output',
      '-J -L -R -D -W -w -S -O': 'hazard-value',
      '-b -B -c -e -i -l -m -p -Q': 'value',
      '-4 -6 -A -a -C -f -G -g -K -k -M -N -n -q -s -T -t -V -v -X -x -Y -y': 'flag',
    },
    strict: true,
  },
  scp: {
    options: {
      '-o': SSH_OPTION,
      '-F': 'script',
      '-S -D': 'command',
      '-J': 'hazard-value',
      '-c -i -l -P -X': 'value',
    },
  },
  sftp: {
    options: {
      '-o': SSH_OPTION,
      '-F -b': 'script',
      '-S -D -s': 'command',
      '-J': 'hazard-value',
      '-c -i -l -P -B -R -X': 'value',
    },
  },
  curl: {
    gnu: true,
    options: {
      '-o --output -D --dump-header -c --cookie-jar --trace --trace-ascii --stderr --libcurl --etag-save --hsts --alt-svc':
        'output',
      '-O --remote-name --remote-name-all -J --remote-header-name': 'hazard',
      '-K --config': 'script',
      '-T --upload-file -d --data --data-binary --data-raw --data-ascii --data-urlencode -F --form --form-string --json -x --proxy --preproxy --output-dir -w --write-out --create-dirs':
        'hazard-value',
      '-H --header -A --user-agent -e --referer -u --user -X --request -b --cookie --url -m --max-time --connect-timeout -r --range --retry -C --continue-at -E --cert --key --cacert --resolve --connect-to':
        'value',
    },
  },
  wget: {
    gnu: true,
    options: {
      '-O --output-document -o --output-file -a --append-output': 'output',
      '--use-askpass': 'command',
      '--post-file --body-file --post-data --body-data -e --execute -P --directory-prefix -x --force-directories':
        'hazard-value',
      '--config -i --input-file': 'script',
      '--header -U --user-agent --user --password -t --tries -T --timeout -w --wait -Q --quota --method --referer -l --level -A --accept -R --reject -D --domains':
        'value',
    },
  },
  git: {
    operands: 'git',
    strict: true,
    options: {
      '-c': GIT_CONFIG_OPTION,
      '--config-env': GIT_CONFIG_ENV_OPTION,
      '-C --git-dir --work-tree --namespace --super-prefix --attr-source': 'hazard-value',
      '--exec-path': GIT_EXEC_PATH,
      '--list-cmds': 'optional',
      '-p --paginate -P --no-pager --bare --no-replace-objects --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks --no-lazy-fetch --no-advice --html-path --man-path --info-path -v --version -h --help':
        'flag',
    },
    subcommands: {
      log: { gnu: true, options: GIT_DIFF_OPTIONS },
      show: { gnu: true, options: GIT_DIFF_OPTIONS },
      diff: { gnu: true, options: GIT_DIFF_OPTIONS },
      whatchanged: { gnu: true, options: GIT_DIFF_OPTIONS },
      'diff-tree': { gnu: true, options: GIT_DIFF_OPTIONS },
      'diff-index': { gnu: true, options: GIT_DIFF_OPTIONS },
      'diff-files': { gnu: true, options: GIT_DIFF_OPTIONS },
      'range-diff': { gnu: true, options: GIT_DIFF_OPTIONS },
      'format-patch': {
        gnu: true,
        options: { ...GIT_DIFF_OPTIONS, '-o --output-directory': 'output' },
      },
      grep: {
        gnu: true,
        options: { '-O --open-files-in-pager': 'command-optional', '-e -f --max-depth': 'value' },
      },
      difftool: {
        gnu: true,
        options: {
          ...GIT_DIFF_OPTIONS,
          '-x --extcmd': 'command',
          '-t --tool': 'hazard-value',
          '-g --gui': 'hazard',
        },
      },
      mergetool: { gnu: true, options: { '-t --tool': 'hazard-value', '-g --gui': 'hazard' } },
      rebase: {
        gnu: true,
        options: {
          '-x --exec': 'command',
          '-s --strategy': 'hazard-value',
          '-X --strategy-option --onto': 'value',
        },
      },
      'filter-branch': {
        options: {
          '--env-filter --tree-filter --index-filter --parent-filter --msg-filter --commit-filter --tag-name-filter --setup':
            'command',
          '-d --subdirectory-filter --prune-empty --original': 'value',
        },
      },
      fetch: { gnu: true, options: { '--upload-pack': 'command' } },
      pull: { gnu: true, options: { '--upload-pack': 'command', '-s --strategy': 'hazard-value' } },
      clone: {
        gnu: true,
        options: {
          '-u --upload-pack': 'command',
          '-c --config': GIT_CONFIG_OPTION,
          '--template': 'script',
          '-b --branch -o --origin --depth --reference --separate-git-dir --filter': 'value',
        },
      },
      'ls-remote': { gnu: true, options: { '-u --upload-pack': 'command' } },
      archive: {
        gnu: true,
        options: {
          '--exec': 'command',
          '-o --output': 'output',
          '--remote': 'hazard-value',
          '--prefix --format': 'value',
        },
      },
      push: {
        gnu: true,
        options: { '--receive-pack --exec': 'command', '-o --push-option --repo': 'value' },
      },
      'send-pack': { gnu: true, options: { '--receive-pack --exec': 'command' } },
      'send-email': {
        gnu: true,
        options: {
          '--sendmail-cmd --to-cmd --cc-cmd --header-cmd': 'command',
          '--smtp-server': SMTP_SERVER,
        },
      },
      help: { gnu: true, options: { '-w --web': 'hazard' } },
      instaweb: { gnu: true, options: { '-d --httpd -b --browser': 'command' } },
      commit: {
        gnu: true,
        options: {
          '-F --file -t --template -m --message -C -c --reuse-message --reedit-message --fixup --squash --author --date --cleanup':
            'value',
        },
      },
      tag: { gnu: true, options: { '-F --file -m --message -u --local-user --cleanup': 'value' } },
      config: {
        gnu: true,
        options: {
          '-f --file': 'value',
          '--blob --type --default --comment': 'value',
          '-e --edit': 'hazard',
        },
      },
      bisect: {},
      submodule: {},
    },
  },
  gh: { operands: 'gh' },
  make: {
    gnu: true,
    operands: 'make',
    options: {
      '-f --file --makefile': 'script',
      '--eval -E': 'code',
      '-C --directory -I --include-dir': 'hazard-value',
      '-j --jobs -l --load-average --max-load -o --old-file --assume-old -W --what-if --new-file --assume-new -O --output-sync --debug --shuffle --jobserver-style':
        'optional',
      '-v --version -h --help': 'flag',
    },
    language: 'make',
    unseen: { what: 'the recipes of a Makefile', exceptOptions: VERSION_OR_HELP },
  },
  npm: {
    gnu: true,
    operands: 'npm',
    options: {
      '--node-options': 'code',
      '--script-shell --shell --editor --browser': 'command',
      '--userconfig --globalconfig --init-module': 'script',
      '-C --prefix': 'hazard-value',
      '-w --workspace --registry --loglevel --tag --otp --cache': 'value',
    },
    subcommands: {
      exec: NPM_EXEC,
      x: NPM_EXEC,
    },
    unseen: {
      what: 'package.json scripts, lifecycle scripts or a package binary',
      except: NPM_RUNS_NOTHING,
      exceptOptions: VERSION_OR_HELP,
    },
  },
  npx: {
    runs: 0,
    strict: true,
    options: {
      '-c --call': 'command',
      '-p --package': 'hazard-value',
      '--shell --script-shell': 'command',
      '--node-options': 'code',
      '-y --yes --no --no-install --ignore-existing -q --quiet': 'flag',
      ...HELP,
    },
    unseen: PACKAGE_BINARY,
  },
  pnpm: {
    options: { '-c --shell-mode': 'hazard', '-C --dir --filter -F -w --workspace-root': 'value' },
    subcommands: {
      exec: {
        runs: 0,
        strict: false,
        options: { '-c --shell-mode': 'hazard', '-r --recursive --parallel': 'flag' },
      },
      dlx: {
        runs: 0,
        strict: false,
        options: { '--package': 'hazard-value', '-c --shell-mode': 'hazard' },
      },
    },
    operands: 'npm',
    unseen: {
      what: 'package.json scripts, lifecycle scripts or a package binary',
      except: NPM_RUNS_NOTHING,
      exceptOptions: VERSION_OR_HELP,
    },
  },
  yarn: {
    operands: 'npm',
    subcommands: {
      exec: PLAIN_WRAPPER,
      dlx: { runs: 0, strict: false, options: { '-p --package': 'hazard-value' } },
      node: NODE,
    },
    // A bare `yarn` installs, running lifecycle scripts.
    unseen: {
      what: 'package.json scripts, lifecycle scripts or a package binary',
      except:
        /^(?:info|why|list|ls|help|config|licenses|owner|outdated|search|whoami|--version|-v)$/,
      exceptOptions: VERSION_OR_HELP,
    },
  },
  docker: {
    operands: 'docker',
    options: {
      '-H --host -c --context --config': 'hazard-value',
      '--privileged --pid --network --net --cap-add --security-opt --device -v --volume --mount -u --user --entrypoint --ipc --uts --userns --cgroupns':
        'hazard-value',
    },
  },
  kubectl: {
    operands: 'docker',
    options: { '--kubeconfig --context --as -s --server': 'hazard-value' },
  },
  // Wrappers: programs that run the program named in their arguments.
  env: {
    runs: 0,
    strict: true,
    operands: 'env',
    options: {
      '-S --split-string': ENV_SPLIT_STRING,
      '-C --chdir -u --unset': 'value',
      '-i --ignore-environment -0 --null -v --debug --list-signal-handling': 'flag',
      '--block-signal --default-signal --ignore-signal': 'optional',
      ...HELP,
    },
  },
  command: { runs: 0, strict: true, options: { '-p': 'flag', '-v -V': 'flag' } },
  builtin: { runs: 0, strict: true },
  exec: { runs: 0, strict: true, options: { '-a': 'value', '-c -l': 'flag' } },
  nice: {
    runs: 0,
    strict: true,
    // `nice -10 prog`: the obsolete form of `-n 10`.
    options: { '-n --adjustment': 'value', '-0 -1 -2 -3 -4 -5 -6 -7 -8 -9': 'flag', ...HELP },
  },
  nohup: PLAIN_WRAPPER,
  time: {
    runs: 0,
    strict: true,
    options: {
      '-o --output': 'output',
      '-f --format': 'value',
      '-a --append -p --portability -v --verbose -q --quiet': 'flag',
      ...HELP,
    },
  },
  timeout: {
    runs: 1,
    strict: true,
    options: {
      '-s --signal -k --kill-after': 'value',
      '--preserve-status --foreground -v --verbose': 'flag',
      ...HELP,
    },
  },
  stdbuf: {
    runs: 0,
    strict: true,
    options: { '-i --input -o --output -e --error': 'value', ...HELP },
  },
  setsid: { runs: 0, strict: true, options: { '-c --ctty -f --fork -w --wait': 'flag', ...HELP } },
  ionice: {
    runs: 0,
    strict: true,
    options: { '-c --class -n --classdata': 'value', '-t --ignore': 'flag', ...HELP },
  },
  chrt: {
    runs: 1,
    strict: true,
    options: {
      '-T --sched-runtime -P --sched-period -D --sched-deadline': 'value',
      '-a --all-tasks -b --batch -d --deadline -e --ext -f --fifo -i --idle -o --other -r --rr -R --reset-on-fork -v --verbose':
        'flag',
      ...HELP,
    },
  },
  taskset: { runs: 1, strict: true, options: { '-a --all-tasks -c --cpu-list': 'flag', ...HELP } },
  flock: {
    runs: 1,
    strict: true,
    options: {
      '-c --command': 'command',
      '-w --wait --timeout -E --conflict-exit-code': 'value',
      '-s --shared -x --exclusive -u --unlock -n --nonblock --nb -o --close -F --no-fork --verbose':
        'flag',
      ...HELP,
    },
  },
  chroot: {
    runs: 1,
    strict: true,
    options: { '--userspec --groups': 'value', '--skip-chdir': 'flag', ...HELP },
  },
  unbuffer: { runs: 0, strict: true, options: { '-p': 'flag' } },
  strace: {
    runs: 0,
    strict: true,
    options: {
      '-o --output': 'output',
      '-e -P -s -a -u -E -X -O -I -b -S -U --trace --signal --status --string-limit --columns --user --env --const-print-style --decode-pids --absolute-timestamps':
        'value',
      '-f -ff -F -c -C -w -d -D -DD -DDD -q -qq -r -t -tt -ttt -T -v -V -x -xx -y -yy -z -Z -k -n -i -h --follow-forks --summary-only --summary --no-abbrev --quiet --relative-timestamps --syscall-times --verbose --seccomp-bpf':
        'flag',
    },
  },
  ltrace: {
    runs: 0,
    strict: true,
    options: {
      '-o --output': 'output',
      '-e -a -l -n -s -u -x -L -A -D': 'value',
      '-b -c -C -f -h -i -r -S -t -tt -ttt -T -V -w': 'flag',
    },
  },
  xargs: {
    runs: 0,
    strict: true,
    operands: 'xargs',
    options: {
      '-a --arg-file -d --delimiter -L --max-lines -n --max-args -P --max-procs -s --max-chars --process-slot-var':
        'value',
      '-I --replace': 'value',
      '-i': 'optional',
      '-e --eof -l': 'optional',
      '-E': 'value',
      '-0 --null -p --interactive -r --no-run-if-empty -t --verbose -x --exit -o --open-tty --show-limits':
        'flag',
      ...HELP,
    },
  },
  sudo: {
    runs: 0,
    strict: true,
    operands: 'sudo',
    options: {
      '-u --user -g --group -p --prompt -C --close-from -h --host -r --role -t --type -T --command-timeout -U --other-user -D --chdir -R --chroot':
        'value',
      '-s --shell -i --login': 'hazard',
      '-e --edit': 'hazard',
      '--preserve-env': 'optional',
      '-E -H --set-home -n --non-interactive -k --reset-timestamp -K --remove-timestamp -b --background -A --askpass -S --stdin -P --preserve-groups -B --bell -N --no-update -l --list -v --validate':
        'flag',
      ...HELP,
    },
  },
  doas: {
    runs: 0,
    strict: true,
    operands: 'sudo',
    options: { '-u -C': 'value', '-s': 'hazard', '-n -L': 'flag' },
  },
  su: {
    gnu: true,
    strict: true,
    operands: 'su',
    options: {
      '-c --command --session-command': 'command',
      '-s --shell -g --group -G --supp-group -w --whitelist-environment': 'value',
      '-l --login -m -p --preserve-environment -f --fast -P --pty': 'flag',
      ...HELP,
    },
  },
  runuser: {
    gnu: true,
    strict: true,
    operands: 'su',
    options: {
      '-c --command --session-command': 'command',
      '-u --user': 'value',
      '-s --shell -g --group -G --supp-group -w --whitelist-environment': 'value',
      '-l --login -m -p --preserve-environment -f --fast -P --pty': 'flag',
      ...HELP,
    },
  },
  sg: { runs: 1, strict: true, options: { '-c': 'command' } },
  pkexec: {
    runs: 0,
    strict: true,
    options: { '--user': 'value', '--disable-internal-agent --keep-cwd': 'flag' },
  },
  script: {
    strict: true,
    operands: 'all-output',
    options: {
      '-c --command': 'command',
      '-t --timing': 'output-optional',
      '-O --log-out -I --log-in -B --log-io -T --log-timing': 'output',
      '-E --echo -m --logging-format -o --output-limit': 'value',
      '-a --append -e --return -f --flush -q --quiet': 'flag',
      ...HELP,
    },
  },
  watch: {
    strict: true,
    operands: 'join',
    options: {
      '-n --interval -q --equexit': 'value',
      '-d --differences': 'optional',
      '-x --exec': 'hazard',
      '-b --beep -c --color -C --no-color -e --errexit -g --chgexit -p --precise -t --no-title -w --no-wrap -r --no-rerun':
        'flag',
      ...HELP,
    },
  },
  entr: {
    strict: true,
    options: { '-s': 'hazard', '-a -c -d -n -p -r -z': 'flag' },
    operands: 'join',
  },
  parallel: {
    strict: true,
    operands: 'join',
    options: {
      '-j --jobs -P -N -n --max-args -L --max-lines -I --replace -a --arg-file -d --delimiter -S --sshlogin --halt --timeout --delay --joblog --results --tmpdir --workdir --colsep -C':
        'value',
      '-k --keep-order -X -m -q --quote --pipe --dry-run --verbose -v -0 --null -r --no-run-if-empty -u --ungroup --line-buffer --tag --will-cite --bar --progress':
        'flag',
    },
  },
  busybox: { runs: 0, strict: true },
  toybox: { runs: 0, strict: true },
  firejail: PLAIN_WRAPPER,
  bwrap: PLAIN_WRAPPER,
  'systemd-run': PLAIN_WRAPPER,
  unshare: PLAIN_WRAPPER,
  nsenter: PLAIN_WRAPPER,
  valgrind: PLAIN_WRAPPER,
  caffeinate: PLAIN_WRAPPER,
  catchsegv: PLAIN_WRAPPER,
  faketime: { runs: 1, strict: true, options: { '-m -p': 'flag', '-f': 'value' } },
  fakeroot: PLAIN_WRAPPER,
  cpulimit: PLAIN_WRAPPER,
  prlimit: PLAIN_WRAPPER,
  proxychains: { runs: 0, strict: true, options: { '-q': 'flag', '-f': 'script' } },
  torsocks: PLAIN_WRAPPER,
  'dbus-launch': PLAIN_WRAPPER,
  'xvfb-run': PLAIN_WRAPPER,
  scl: PLAIN_WRAPPER,
  'with-contenv': PLAIN_WRAPPER,
  's6-setuidgid': { runs: 1, strict: true },
  setpriv: PLAIN_WRAPPER,
  chpst: PLAIN_WRAPPER,
  daemonize: PLAIN_WRAPPER,
  'start-stop-daemon': PLAIN_WRAPPER,
  numactl: PLAIN_WRAPPER,
  newgrp: { runs: 1, strict: true, operands: 'shell' },
  pnpx: { runs: 0, strict: false },
  bunx: { runs: 0, strict: false, options: { '--bun': 'flag', '-p --package': 'hazard-value' } },
  uvx: {
    runs: 0,
    strict: false,
    options: { '--from --with -p --python --index-url': 'hazard-value' },
  },
  pipx: {
    subcommands: { run: { runs: 0, strict: false, options: { '--spec': 'hazard-value' } } },
    unseen: { what: 'a package it installs', except: /^(?:|list|environment|completions)$/ },
  },
  // Issue 23: wrappers and code runners the table did not know.
  'ld.so': DYNAMIC_LOADER,
  socat: {
    operands: 'socat',
    options: {
      '-lf -r -R -L -W': 'output',
      '-b -t -T -S -lp': 'value',
      '-ly -lm': 'optional',
      '-d -D -v -x -s -u -U -g -4 -6 -ls -lu -lh -hh -hhh -V -h': 'flag',
    },
  },
  ncat: {
    options: {
      '-e --exec -c --sh-exec': 'command',
      '--lua-exec': 'script',
      '-o --output -x --hex-dump': 'output',
    },
  },
  nc: { options: { '-e -c': 'command' } },
  perf: {
    subcommands: {
      record: PERF_RUNS,
      stat: PERF_RUNS,
      trace: PERF_RUNS,
      ftrace: PERF_RUNS,
      mem: PERF_RUNS,
      c2c: PERF_RUNS,
      lock: PERF_RUNS,
      kmem: PERF_RUNS,
      kvm: PERF_RUNS,
      sched: PERF_RUNS,
      timechart: PERF_RUNS,
      kwork: PERF_RUNS,
      script: { options: { '-s --script': 'script' } },
    },
  },
  uftrace: { ...LOOSE_WRAPPER, subcommands: { record: LOOSE_WRAPPER, live: LOOSE_WRAPPER } },
  rr: {
    ...LOOSE_WRAPPER,
    subcommands: { record: LOOSE_WRAPPER, replay: {}, ps: {}, pack: {}, dump: {}, help: {} },
  },
  lldb: {
    language: 'lldb',
    operands: 'all-code',
    options: {
      '-o --one-line -O --one-line-before-file -k --one-line-on-crash': 'code',
      '-s --source -S --source-before-file': 'script',
    },
  },
  setarch: { runs: 1, gnu: true, strict: true, shellWithout: true, options: SETARCH_OPTIONS },
  linux32: { runs: 0, gnu: true, strict: true, shellWithout: true, options: SETARCH_OPTIONS },
  capsh: { operands: 'capsh' },
  'run-parts': {
    gnu: true,
    options: {
      '--test --list --report -v --verbose --reverse --exit-on-error --new-session --lsbsysinit':
        'flag',
      '-u --umask --regex -a --arg': 'value',
    },
    unseen: { what: 'every program in a directory', exceptOptions: /^--(?:test|list)$/ },
  },
  ed: {
    language: 'ed',
    operands: 'stdin-code',
    options: { '-p --prompt': 'value' },
  },
  ex: {
    language: 'ex',
    operands: 'stdin-code',
    options: { '-c --cmd': 'code', '-S -u -U': 'script', '-w -W': 'output' },
  },
  at: {
    language: 'shell',
    operands: 'stdin-code',
    options: { '-f': 'script', '-q -t': 'value', '-m -M -b -v -c -l -r -d -V': 'flag' },
  },
  'ssh-agent': {
    runs: 0,
    strict: true,
    options: { '-a -E -O -P -t': 'value', '-c -D -d -k -s': 'flag' },
  },
  'gpg-agent': { ...LOOSE_WRAPPER, options: { '--options --homedir': 'script' } },
  'dbus-run-session': {
    runs: 0,
    strict: true,
    options: { '--config-file': 'script', '--dbus-daemon': 'command', ...HELP },
  },
  chronic: { runs: 0, strict: true, options: { '-e -v': 'flag' } },
  ifne: { runs: 0, strict: true, options: { '-n': 'flag' } },
  eatmydata: PLAIN_WRAPPER,
  nocache: PLAIN_WRAPPER,
  trickle: {
    runs: 0,
    strict: true,
    options: { '-u -d -w -t -l -n': 'value', '-h -v -V -s': 'flag' },
  },
  cgexec: { runs: 0, strict: true, options: { '-g': 'value', '--sticky -h': 'flag' } },
  runcon: LOOSE_WRAPPER,
  sshpass: { runs: 0, strict: true, options: { '-p -f -d -P': 'value', '-e -v -h -V': 'flag' } },
  proot: { ...LOOSE_WRAPPER, shellWithout: true },
  fakechroot: PLAIN_WRAPPER,
  tsp: LOOSE_WRAPPER,
  srun: LOOSE_WRAPPER,
  mpirun: LOOSE_WRAPPER,
  hyperfine: {
    operands: 'commands',
    options: {
      '-p --prepare -c --cleanup -s --setup --conclude': 'command',
      '--export-asciidoc --export-csv --export-json --export-markdown --export-orgmode': 'output',
      '-S --shell': 'command',
      '-w --warmup -m --min-runs -M --max-runs -r --runs -P --parameter-scan -L --parameter-list -n --command-name -u --time-unit --style --sort -D --parameter-step-size':
        'value',
    },
  },
  watchexec: {
    operands: 'join',
    options: { '-w --watch -e --exts -f --filter -i --ignore': 'value' },
  },
  nodemon: {
    language: 'JavaScript',
    operands: 'script',
    options: { '-x --exec': 'command', '-w --watch -e --ext -i --ignore': 'value' },
  },
  concurrently: { operands: 'commands' },
  direnv: {
    subcommands: { exec: { runs: 1, strict: false } },
    unseen: {
      what: 'the .envrc file of a directory',
      except: /^(?:|status|help|version|dump|hook)$/,
    },
  },
  'cross-env': { runs: 0, strict: false, operands: 'env' },
  dotenv: {
    runs: 0,
    strict: false,
    options: { '-e -v -c': 'value' },
    unseen: { what: 'variables from a .env file (PATH and NODE_OPTIONS among them)' },
  },
  claude: AGENT_CLI,
  codex: AGENT_CLI,
  aider: AGENT_CLI,
  gemini: AGENT_CLI,
  opencode: AGENT_CLI,
  goose: AGENT_CLI,
  'cursor-agent': AGENT_CLI,
  amp: AGENT_CLI,
  qwen: AGENT_CLI,
  crush: AGENT_CLI,
  copilot: AGENT_CLI,
  // Build tools, task runners and test runners: they run the project's own code.
  cargo: projectRunner(
    'build scripts, tests or the program it builds',
    /^(?:|fmt|tree|metadata|search|version|help|locate-project|pkgid|verify-project|new|init|login|logout|owner|yank)$/,
  ),
  go: projectRunner(
    'the program or tests it builds, or generators',
    /^(?!(?:run|test|generate|tool)$)/,
  ),
  pytest: projectRunner('test files and conftest.py'),
  tox: projectRunner('the commands of tox.ini'),
  nox: projectRunner('the sessions of noxfile.py'),
  jest: projectRunner('test files and their configuration'),
  vitest: projectRunner('test files and their configuration'),
  mocha: projectRunner('test files'),
  rake: projectRunner('the tasks of a Rakefile'),
  gradle: projectRunner('build scripts'),
  gradlew: projectRunner('build scripts'),
  mvn: projectRunner('build plugins'),
  just: projectRunner('the recipes of a justfile'),
  task: projectRunner('the tasks of a Taskfile'),
  bazel: projectRunner('build rules'),
  ninja: projectRunner('the commands of build.ninja'),
  cmake: projectRunner('CMake scripts'),
  meson: projectRunner('build files'),
  scons: projectRunner('SConstruct files'),
  poetry: projectRunner('scripts and build backends'),
  uv: projectRunner('scripts and build backends', /^(?:|help|version|self|cache|python)$/),
  pipenv: projectRunner('scripts and build backends'),
  pip: projectRunner(
    'build backends of the packages it installs',
    /^(?:|list|show|freeze|check|help|search|debug|config|cache|inspect|index|hash|--version)$/,
  ),
  pip3: projectRunner(
    'build backends of the packages it installs',
    /^(?:|list|show|freeze|check|help|search|debug|config|cache|inspect|index|hash|--version)$/,
  ),
  bundle: projectRunner('Gemfile code and the programs it wraps'),
  composer: projectRunner('composer.json scripts'),
  nx: projectRunner('project targets'),
  turbo: projectRunner('package.json scripts'),
  lerna: projectRunner('package.json scripts'),
  dotnet: projectRunner(
    'the program or tests it builds',
    /^(?:|--info|--list-sdks|--list-runtimes|help|new|sln|nuget)$/,
  ),
  mix: projectRunner('mix tasks'),
  sbt: projectRunner('build definitions'),
  lein: projectRunner('project definitions'),
  swift: projectRunner('the package it builds', /^(?:|--version)$/),
  'pre-commit': projectRunner('the hooks of .pre-commit-config.yaml'),
  lefthook: projectRunner('the hooks of lefthook.yml'),
  husky: projectRunner('git hooks'),
  eslint: projectRunner('its configuration file and plugins'),
  prettier: projectRunner('its configuration file and plugins'),
  webpack: projectRunner('its configuration file'),
  vite: projectRunner('its configuration file'),
  rollup: projectRunner('its configuration file'),
  gulp: projectRunner('a gulpfile'),
  grunt: projectRunner('a Gruntfile'),
  playwright: projectRunner('test files and their configuration'),
  cypress: projectRunner('test files and their configuration'),
  'ansible-playbook': projectRunner('a playbook'),
  terraform: projectRunner(
    'providers and provisioners',
    /^(?:|fmt|version|validate|show|output|providers|graph|help)$/,
  ),
};

/** Other names of the programs in {@link PROGRAMS} (versions, forks, the same tool on macOS). */
const ALIASES: Readonly<Record<string, string>> = {
  bash: 'sh',
  zsh: 'sh',
  dash: 'sh',
  ksh: 'sh',
  mksh: 'sh',
  ash: 'sh',
  fish: 'sh',
  csh: 'sh',
  tcsh: 'sh',
  yash: 'sh',
  rbash: 'sh',
  posh: 'sh',
  gawk: 'awk',
  mawk: 'awk',
  nawk: 'awk',
  gsed: 'sed',
  gfind: 'find',
  gtar: 'tar',
  bsdtar: 'tar',
  gmake: 'make',
  nvim: 'vim',
  vi: 'vim',
  view: 'vim',
  ex: 'vim',
  gvim: 'vim',
  vimdiff: 'vim',
  rvim: 'vim',
  luajit: 'lua',
  jruby: 'ruby',
  powershell: 'pwsh',
  wish: 'tclsh',
  podman: 'docker',
  nerdctl: 'docker',
  proxychains4: 'proxychains',
  gsort: 'sort',
  ggrep: 'grep',
  egrep: 'grep',
  fgrep: 'grep',
  red: 'ed',
  netcat: 'nc',
  linux64: 'linux32',
  i386: 'linux32',
  x86_64: 'linux32',
  uname26: 'linux32',
  mpiexec: 'mpirun',
  'gpgconf-agent': 'gpg-agent',
};

const VERSIONED = /^(python|pypy|perl|php|ruby|lua)[0-9.]*$/;

const specCache = new Map<string, ProgramSpec | null>();

/** The table entry for a program basename, if any (looked up once per name). */
export function programSpec(base: string): ProgramSpec | undefined {
  let spec = specCache.get(base);
  if (spec === undefined) {
    spec = lookUp(base) ?? null;
    if (specCache.size >= 4_096) specCache.clear();
    specCache.set(base, spec);
  }
  return spec ?? undefined;
}

function lookUp(base: string): ProgramSpec | undefined {
  const own = (table: object, key: string) => Object.prototype.hasOwnProperty.call(table, key);
  if (own(PROGRAMS, base)) return PROGRAMS[base];
  if (own(ALIASES, base)) return PROGRAMS[ALIASES[base]!];
  if (DYNAMIC_LOADER_NAME.test(base)) return DYNAMIC_LOADER;
  const m = VERSIONED.exec(base);
  return m === null ? undefined : PROGRAMS[m[1]!];
}

/** `ld.so`, `ld-linux-x86-64.so.2`, `ld-linux-aarch64.so.1`, `ld-musl-x86_64.so.1`, `ld-2.31.so`. */
const DYNAMIC_LOADER_NAME = /^ld(?:-[A-Za-z0-9_.-]+)?\.so(?:\.[0-9]+)*$/;

/**
 * Environment variables whose value is a command some program runs through the shell (a pager,
 * an editor, a remote shell): `PAGER='sh -c …' git log`. Their values are analysed like `sh -c`.
 */
const COMMAND_VARIABLES =
  /^(?:PAGER|GIT_PAGER|MANPAGER|SYSTEMD_PAGER|BAT_PAGER|DELTA_PAGER|GH_PAGER|PSQL_PAGER|EDITOR|VISUAL|GIT_EDITOR|GIT_SEQUENCE_EDITOR|SUDO_EDITOR|FCEDIT|GIT_SSH_COMMAND|GIT_SSH|GIT_EXTERNAL_DIFF|GIT_PROXY_COMMAND|GIT_ASKPASS|SSH_ASKPASS|SUDO_ASKPASS|BROWSER|RSYNC_RSH|CVS_RSH|PROMPT_COMMAND|LESSOPEN|LESSCLOSE|SHELL|[A-Z0-9_]*(?:_PAGER|_EDITOR|_COMMAND|_CMD|ASKPASS|_RSH))$/;

/**
 * Environment variables that make a program load code or configuration from somewhere the
 * command does not show (a preloaded library, an rc file, another config, extra options).
 */
const OPAQUE_VARIABLES =
  /^(?:LD_[A-Z_]+|DYLD_[A-Z_]+|BASH_ENV|ENV|ZDOTDIR|BASHOPTS|SHELLOPTS|PS4|IFS|PATH|HOME|CDPATH|GLOBIGNORE|PERL5OPT|PERL5LIB|PERLLIB|PERL5DB|PYTHONPATH|PYTHONHOME|PYTHONSTARTUP|PYTHONINSPECT|PYTHONWARNINGS|PYTHONBREAKPOINT|NODE_OPTIONS|NODE_PATH|RUBYOPT|RUBYLIB|LUA_INIT(?:_[0-9_]+)?|LUA_PATH|LUA_CPATH|TCLLIBPATH|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|CLASSPATH|GIT_CONFIG[A-Z0-9_]*|GIT_DIR|GIT_WORK_TREE|GIT_EXEC_PATH|GIT_TEMPLATE_DIR|GIT_CEILING_DIRECTORIES|GIT_NAMESPACE|TAR_OPTIONS|ZIPOPT|UNZIP|GZIP|XZ_OPT|MAKEFLAGS|MFLAGS|GNUMAKEFLAGS|MAKEFILES|MANOPT|LESS|LESSKEY|LESSKEYIN|LESSKEYIN_SYSTEM|VIMINIT|EXINIT|MYVIMRC|XDG_CONFIG_HOME|XDG_CONFIG_DIRS|WGETRC|CURL_HOME|RIPGREP_CONFIG_PATH|AWKPATH|AWKLIBPATH|KUBECONFIG|DOCKER_HOST|DOCKER_CONFIG|SSH_AUTH_SOCK|(?:npm|NPM|YARN|PNPM)_CONFIG_[A-Za-z0-9_]+|[A-Z0-9_]*(?:_OPTIONS|_OPTS|_PRELOAD|_INIT))$/;

/** What an assignment `NAME=VALUE` before a program (or after `env`) does to it. */
export function assignmentEffect(name: string, value: string): OptionEffect {
  if (COMMAND_VARIABLES.test(name)) {
    let command = value;
    // less's input preprocessor: `|cmd %s`, `||cmd %s`, `-|cmd`, `|-cmd`.
    if (name === 'LESSOPEN' || name === 'LESSCLOSE') command = value.replace(/^[|-]+/, '');
    return { kind: 'command', command };
  }
  if (OPAQUE_VARIABLES.test(name))
    return {
      kind: 'opaque',
      reason: `the environment variable ${name} changes what the program loads or runs`,
    };
  return { kind: 'none' };
}

/** The last path component of a program word (`/usr/bin/rm` → `rm`). */
export function basename(word: string): string {
  const slash = word.lastIndexOf('/');
  return slash < 0 ? word : word.slice(slash + 1);
}

/**
 * Builtins of every shell the executors run: a file the command writes cannot stand in for them,
 * and they run no other program.
 */
export const SHELL_BUILTINS: ReadonlySet<string> = new Set([
  'cd',
  'pushd',
  'popd',
  'dirs',
  'echo',
  'printf',
  'test',
  '[',
  'true',
  'false',
  ':',
  'pwd',
  'type',
  'exit',
  'return',
  'break',
  'continue',
  'shift',
  'wait',
  'jobs',
  'kill',
  'umask',
  'ulimit',
  'times',
  'help',
  'logout',
  'disown',
  'suspend',
]);

/**
 * Programs the table knows to run no other program and no code of their own choosing, beyond what
 * {@link PROGRAMS} says of them: coreutils and the other everyday tools. A program that is in
 * neither is one the matcher does not know: it may be a renamed copy of a denied program or a
 * wrapper, so a deny or ask rule that could cover its arguments asks (see `UnseenCode`).
 */
export const PLAIN_PROGRAMS: ReadonlySet<string> = new Set([
  ...SHELL_BUILTINS,
  // coreutils, util-linux and procps
  ...'ls dir vdir cat tac head tail wc cut paste join tr fold fmt pr nl expand unexpand od hexdump strings rev shuf comm cmp diff diff3 sdiff md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum sum base32 basenc mkdir rmdir rm unlink chmod chown chgrp stat file du df readlink realpath basename dirname pathchk mktemp mkfifo mknod sync shred date sleep whoami id groups uname hostname hostid nproc arch uptime users who w tty stty printenv seq yes factor expr numfmt tsort ptx tree which whereis locale getconf free ps pgrep pkill killall top lsof lsblk findmnt column colrm look cal iconv fallocate rename getent logname tput clear reset dmesg vmstat iostat pidof'.split(
    ' ',
  ),
  // text and data tools without options that run commands
  ...'jq yq gron diffstat colordiff dos2unix unix2dos xmllint'.split(' '),
  // compression and archives without options that run commands
  ...'gzip gunzip zcat bzip2 bunzip2 bzcat xz unxz xzcat zstd unzstd zstdcat lz4 unzip zipinfo 7z 7za ar'.split(
    ' ',
  ),
  // network clients without options that run commands
  ...'ping dig nslookup host traceroute ss netstat'.split(' '),
  // tools that compile or inspect without running what they read
  ...'tsc nm objdump readelf strip size addr2line c++filt'.split(' '),
]);

/** Directories system programs live in: a program named by a path there is that program. */
export const SYSTEM_PROGRAM_DIRS: ReadonlySet<string> = new Set([
  '/bin',
  '/sbin',
  '/usr/bin',
  '/usr/sbin',
  '/usr/local/bin',
  '/usr/local/sbin',
  '/lib',
  '/lib64',
  '/usr/lib',
  '/usr/lib64',
  '/lib/x86_64-linux-gnu',
  '/lib/aarch64-linux-gnu',
  '/usr/lib/x86_64-linux-gnu',
  '/usr/lib/aarch64-linux-gnu',
]);
