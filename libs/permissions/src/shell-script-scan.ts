/**
 * Scanners for the two script languages that allow-listed text tools carry on their command line:
 * sed scripts and awk programs. They do not interpret the scripts; they find the constructs that
 * make the tool run a program or write a file, and report anything they cannot parse so the caller
 * fails closed.
 */

/** What a sed script does beyond editing its input to stdout. */
export interface SedScan {
  /** The script could not be parsed (sed may read it differently): treat it as opaque. */
  readonly error: string | undefined;
  /** `e` without a command or the `s///e` flag: sed runs text from its input as a command. */
  readonly executesInput: boolean;
  /** `e COMMAND`: commands sed runs. */
  readonly commands: readonly string[];
  /** `w FILE`, `W FILE`, `s///w FILE`: files sed writes. */
  readonly writes: readonly string[];
}

const SED_SIMPLE = new Set(['=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F']);

/**
 * Scans a (GNU) sed script. Commands are separated by newlines and `;`; the commands that take the
 * rest of the line (`a`, `i`, `c`, `r`, `R`, `w`, `W`, `e`) take it to the newline, as sed does.
 */
export function scanSedScript(script: string): SedScan {
  const commands: string[] = [];
  const writes: string[] = [];
  let executesInput = false;
  const n = script.length;
  let i = 0;
  const fail = (why: string): SedScan => ({
    error: why,
    executesInput,
    commands,
    writes,
  });
  const skipBlanks = () => {
    while (i < n && (script[i] === ' ' || script[i] === '\t')) i++;
  };
  /** Reads up to the unescaped `delim`; false when the text ends first. */
  const delimited = (delim: string): boolean => {
    while (i < n) {
      const ch = script[i]!;
      if (ch === '\\') i += 2;
      else if (ch === delim) {
        i++;
        return true;
      } else if (ch === '\n') return false;
      else i++;
    }
    return false;
  };
  /** The rest of the line (a file name or a command), leading blanks dropped. */
  const restOfLine = (): string => {
    skipBlanks();
    const start = i;
    while (i < n && script[i] !== '\n') i++;
    return script.slice(start, i);
  };
  /** After a command: blanks, then the end of the command (`;`, newline, `}`, `#`, the end). */
  const endOfCommand = (): boolean => {
    skipBlanks();
    if (i >= n) return true;
    const ch = script[i]!;
    return ch === ';' || ch === '\n' || ch === '}' || ch === '#';
  };
  const address = (): boolean => {
    const ch = script[i];
    if (ch === undefined) return true;
    if (ch >= '0' && ch <= '9') {
      while (i < n && script[i]! >= '0' && script[i]! <= '9') i++;
      if (script[i] === '~') {
        i++;
        while (i < n && script[i]! >= '0' && script[i]! <= '9') i++;
      }
    } else if (ch === '$') i++;
    else if (ch === '/' || ch === '\\') {
      let delim = '/';
      if (ch === '\\') {
        delim = script[i + 1] ?? '';
        if (delim === '' || delim === '\n') return false;
        i++;
      }
      i++;
      if (!delimited(delim)) return false;
      while (script[i] === 'I' || script[i] === 'M') i++;
    } else if (ch === '+' || ch === '~') {
      i++;
      while (i < n && script[i]! >= '0' && script[i]! <= '9') i++;
    }
    return true;
  };

  while (i < n) {
    const ch = script[i]!;
    if (ch === ' ' || ch === '\t' || ch === '\n' || ch === ';') {
      i++;
      continue;
    }
    if (ch === '#') {
      while (i < n && script[i] !== '\n') i++;
      continue;
    }
    if (!address()) return fail('unterminated address');
    skipBlanks();
    if (script[i] === ',') {
      i++;
      skipBlanks();
      if (!address()) return fail('unterminated address');
      skipBlanks();
    }
    while (script[i] === '!') {
      i++;
      skipBlanks();
    }
    const cmd = script[i++];
    if (cmd === undefined) return fail('an address without a command');
    if (cmd === '{' || cmd === '}') continue;
    if (SED_SIMPLE.has(cmd)) {
      if (!endOfCommand()) return fail(`text after '${cmd}'`);
      continue;
    }
    switch (cmd) {
      case 'a':
      case 'i':
      case 'c':
        // Text to the end of the line; a backslash continues it on the next line.
        while (i < n && script[i] !== '\n') i += script[i] === '\\' ? 2 : 1;
        break;
      case ':':
      case 'b':
      case 't':
      case 'T':
        skipBlanks();
        while (i < n && script[i] !== ';' && script[i] !== '\n') i++;
        break;
      case 'r':
      case 'R':
        restOfLine();
        break;
      case 'w':
      case 'W': {
        const file = restOfLine();
        if (file === '') return fail(`'${cmd}' without a file name`);
        writes.push(file);
        break;
      }
      case 'e': {
        const command = restOfLine();
        if (command.trim() === '') executesInput = true;
        else commands.push(command);
        break;
      }
      case 'q':
      case 'Q':
      case 'l':
      case 'L':
        skipBlanks();
        while (i < n && script[i]! >= '0' && script[i]! <= '9') i++;
        if (!endOfCommand()) return fail(`text after '${cmd}'`);
        break;
      case 'v':
        while (i < n && script[i] !== ';' && script[i] !== '\n') i++;
        break;
      case 'y': {
        const delim = script[i++];
        if (delim === undefined || delim === '\n' || delim === '\\')
          return fail("a bad delimiter after 'y'");
        if (!delimited(delim) || !delimited(delim)) return fail("an unterminated 'y'");
        if (!endOfCommand()) return fail("text after 'y'");
        break;
      }
      case 's': {
        const delim = script[i++];
        if (delim === undefined || delim === '\n' || delim === '\\')
          return fail("a bad delimiter after 's'");
        if (!delimited(delim)) return fail("an unterminated 's' pattern");
        // The replacement may span lines with backslash-newline.
        let closed = false;
        while (i < n) {
          const c = script[i]!;
          if (c === '\\') i += 2;
          else if (c === delim) {
            i++;
            closed = true;
            break;
          } else if (c === '\n') break;
          else i++;
        }
        if (!closed) return fail("an unterminated 's' replacement");
        for (;;) {
          const f = script[i];
          if (f === 'g' || f === 'p' || f === 'i' || f === 'I' || f === 'm' || f === 'M') i++;
          else if (f !== undefined && f >= '0' && f <= '9') i++;
          else if (f === 'e') {
            executesInput = true;
            i++;
          } else if (f === 'w') {
            i++;
            const file = restOfLine();
            if (file === '') return fail("the 'w' flag without a file name");
            writes.push(file);
            break;
          } else break;
        }
        if (!endOfCommand()) return fail("unknown flags after 's'");
        break;
      }
      default:
        return fail(`unknown command '${cmd}'`);
    }
  }
  return { error: undefined, executesInput, commands, writes };
}

/** What an awk program does beyond reading its input and printing to stdout. */
export interface AwkScan {
  /** `system()`, a pipe (`print | "cmd"`, `"cmd" | getline`, `|&`): awk runs commands. */
  readonly runsCommands: boolean;
  /** `print > FILE`, `printf >> FILE`: awk writes files it names at run time. */
  readonly writesFiles: boolean;
  /** `getline` (from a file or the input). */
  readonly readsFiles: boolean;
  /** `@`: gawk's indirect calls (`@f()` may call `system`), `@load`, `@include`. */
  readonly indirect: boolean;
}

const AWK_SYSTEM = /\bsystem\b/;
const AWK_GETLINE = /\bgetline\b/;
const AWK_PRINT_THEN_GT = /\bprintf?\b[\s\S]*>/;

/**
 * Scans an awk program by its tokens' spelling, not its grammar, so it errs towards finding a
 * construct (a `|` in a regular expression counts as a pipe, a `>` after any `print` as a
 * redirection): a false find only costs an approval.
 */
export function scanAwkProgram(program: string): AwkScan {
  return {
    runsCommands: AWK_SYSTEM.test(program) || program.replace(/\|\|/g, '').includes('|'),
    writesFiles: AWK_PRINT_THEN_GT.test(program),
    readsFiles: AWK_GETLINE.test(program),
    indirect: program.includes('@'),
  };
}
