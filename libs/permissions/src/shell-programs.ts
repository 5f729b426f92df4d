/**
 * What the shell matcher knows about particular programs. These tables only ever make matching
 * stricter: they decide which segments are unmatchable, which segments poison the ones after them,
 * which programs run another program (so deny and ask patterns also look at what they run), and
 * which option tokens a wildcard in an allow pattern may never stand for.
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
 * Programs that run another program given in their arguments. Deny and ask patterns are also
 * tried against every suffix of their argv, so `sudo rm -rf /` meets `rm **`; an allow for the
 * inner program never covers the wrapper, because allow patterns see the whole argv.
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
]);

/** Shells: `-c STRING` runs STRING as a command, which is analysed like the outer one. */
const SHELLS: ReadonlySet<string> = new Set([
  'sh',
  'bash',
  'zsh',
  'dash',
  'ksh',
  'mksh',
  'ash',
  'fish',
  'csh',
  'tcsh',
  'yash',
  'rbash',
]);

const SHELL_COMMAND_OPTION = /^-[A-Za-z]*c[A-Za-z]*$/;

/**
 * If `argv` (program first) runs a string as a shell command (`bash -c STR`, `su -c STR`,
 * `env -S STR`, `script -c STR`, `watch STR...`), that string; otherwise undefined. `null` when the
 * program would run code but the string cannot be found (fail closed).
 */
export function commandString(program: string, argv: readonly string[]): string | null | undefined {
  if (SHELLS.has(program)) {
    for (let i = 1; i < argv.length; i++) {
      const a = argv[i] as string;
      if (a === '--') return undefined;
      if (a === '-c' || SHELL_COMMAND_OPTION.test(a) || a === '--command') {
        const s = argv[i + 1];
        return s === undefined ? null : s;
      }
      if (a.charCodeAt(0) !== 45 && a.charCodeAt(0) !== 43) return undefined;
    }
    return undefined;
  }
  if (program === 'su' || program === 'runuser' || program === 'script' || program === 'sg') {
    for (let i = 1; i < argv.length; i++) {
      const a = argv[i] as string;
      if (a === '-c' || a === '--command') return argv[i + 1] ?? null;
      if (a.startsWith('--command=')) return a.slice('--command='.length);
    }
    return undefined;
  }
  if (program === 'env') {
    for (let i = 1; i < argv.length; i++) {
      const a = argv[i] as string;
      if (a === '-S' || a === '--split-string') return argv[i + 1] ?? null;
      if (a.startsWith('--split-string=')) return a.slice('--split-string='.length);
      if (a.startsWith('-S')) return a.slice(2);
    }
    return undefined;
  }
  if (program === 'watch' || program === 'ssh') {
    // Both join their remaining arguments with spaces and hand them to a shell.
    let i = 1;
    for (; i < argv.length; i++) {
      const a = argv[i] as string;
      if (a.charCodeAt(0) !== 45) break;
      if (/^-[nd]$|^-[bclopFiLJmOQRSwWeEI]$/.test(a)) i++;
    }
    if (program === 'ssh') i++; // the destination
    return i < argv.length ? argv.slice(i).join(' ') : undefined;
  }
  return undefined;
}

/**
 * Option tokens through which a program runs inline code or another program. A wildcard in an
 * allow pattern never stands for one of them: `python **` does not allow `python -c '...'`, only a
 * pattern that spells the option out (`python -c *`) does.
 */
const INLINE_CODE_OPTIONS: ReadonlyArray<readonly [RegExp, RegExp]> = [
  [/^(?:python[0-9.]*|pypy[0-9.]*)$/, /^-[A-Za-z]*c|^--command/],
  [
    /^(?:node|nodejs|bun|deno|tsx|ts-node)$/,
    /^(?:-[A-Za-z]*[ep]|--eval|--print|-r$|--require|--import|--loader|--experimental-loader|eval$)/,
  ],
  [/^perl[0-9.]*$/, /^-[A-Za-z]*[eEMm]|^-[A-Za-z]*x/],
  [/^(?:ruby|irb|jruby)$/, /^-[A-Za-z]*[erI]/],
  [/^php[0-9.]*$/, /^-[A-Za-z]*[rRBEFd]/],
  [
    /^(?:lua|luajit|Rscript|R|osascript|tclsh|wish|julia|groovy|scala|kotlin|elixir|erl|swift|pwsh|powershell)$/,
    /^-|^--/,
  ],
  [
    new RegExp(`^(?:${[...SHELLS].join('|')})$`),
    /^-[A-Za-z]*c|^--command|^--init-file|^--rcfile|^-[A-Za-z]*O/,
  ],
  [/^(?:find|gfind)$/, /^-(?:exec|execdir|ok|okdir|delete|fprint|fprint0|fprintf|fls)$/],
  [
    /^git$/,
    /^(?:-c|--config-env|--exec-path|--upload-pack|--receive-pack|-u$|--exec|--git-dir|--work-tree|--namespace|--super-prefix)/,
  ],
  [
    /^(?:tar|gtar|bsdtar)$/,
    /^(?:--checkpoint-action|--to-command|--use-compress-program|--info-script|--new-volume-script|--rsh-command|-I$|-F$|-[A-Za-z]*[IF]$)/,
  ],
  [/^rsync$/, /^(?:-e$|--rsh|--rsync-path|-[A-Za-z]*e$)/],
  [/^(?:ssh|scp|sftp)$/, /^(?:-o|-F|-S|-J|-W|-L|-R|-D|ProxyCommand)/],
  [/^(?:zip|unzip)$/, /^(?:-TT|--unzip-command|-T$)/],
  [/^(?:vim|vi|nvim|view|ex|gvim)$/, /^(?:-c|--cmd|\+|-S)/],
  [/^(?:make|gmake)$/, /^(?:--eval|-E$|SHELL=|-f$|--file|--makefile|-C$|--directory)/],
  [/^(?:less|more|man)$/, /^(?:-P|--prompt|-p$|--pager|-H$|--html)/],
  [/^(?:sed|gsed)$/, /^(?:-i|--in-place|-f$|--file|-[A-Za-z]*[if])/],
  [
    /^(?:curl|wget)$/,
    /^(?:-o$|-O$|--output|-K$|--config|--upload-file|-T$|-d$|--data|-F$|--form|-x$|--proxy|-e$|--execute|--post-file|--post-data|-[A-Za-z]*[oOKT]$)/,
  ],
  [
    /^(?:npm|pnpm|yarn)$/,
    /^(?:exec$|x$|dlx$|-c$|--call|--node-options|--script-shell|--userconfig|--prefix)/,
  ],
  [
    /^(?:docker|podman|kubectl)$/,
    /^(?:-H$|--host|--privileged|-v$|--volume|--mount|--pid|--network|--cap-add|--security-opt|--device|-u$|--user|--entrypoint|exec$|run$)/,
  ],
];

/** Programs whose every argument is code (awk programs call `system()`); wildcards never match them. */
const ALL_ARGUMENTS_ARE_CODE =
  /^(?:awk|gawk|mawk|nawk|busybox|dc|bc|jq|yq|expect|gdb|sqlite3|psql|mysql)$/;

/** A predicate telling which argument tokens of `program` no wildcard may stand for. */
export type SensitiveToken = (token: string) => boolean;

const NEVER: SensitiveToken = () => false;
const ALWAYS: SensitiveToken = () => true;

const sensitivityCache = new Map<string, SensitiveToken>();

/** The sensitivity predicate for `program` (a basename); cached per program name. */
export function sensitiveTokensOf(program: string): SensitiveToken {
  let predicate = sensitivityCache.get(program);
  if (predicate === undefined) {
    predicate = NEVER;
    if (ALL_ARGUMENTS_ARE_CODE.test(program)) predicate = ALWAYS;
    else {
      for (const [prog, opt] of INLINE_CODE_OPTIONS) {
        if (prog.test(program)) {
          predicate = (t) => opt.test(t);
          break;
        }
      }
    }
    if (sensitivityCache.size >= 1_024) sensitivityCache.clear();
    sensitivityCache.set(program, predicate);
  }
  return predicate;
}

/** The last path component of a program word (`/usr/bin/rm` → `rm`). */
export function basename(word: string): string {
  const slash = word.lastIndexOf('/');
  return slash < 0 ? word : word.slice(slash + 1);
}
