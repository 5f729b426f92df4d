/**
 * A POSIX-like shell lexer for permission matching. It honours quotes and escapes, expands
 * nothing, and splits a command into segments at `;`, `&&`, `||`, `|`, `|&`, `&`, newlines and
 * carriage returns. Anything whose meaning it cannot pin down (substitutions, here-docs,
 * subshells, complex parameter expansions, unbalanced quotes, invisible characters, ...) marks
 * its segment unmatchable, with the reason, so matching fails closed (ask), never open.
 */

/** One lexed word (or redirection operator) after quote removal. */
export interface ShellWord {
  /** The word after quote removal; expansions are kept as their raw source text. */
  readonly text: string;
  /** A redirection operator (`>`, `>>`, `2>&1`, `>|`, `<`, `&>`, ...), a token of its own. */
  readonly redirect: boolean;
  /** The word that follows a redirection operator (its target). */
  readonly redirectTarget: boolean;
  /** Contains an unquoted or double-quoted parameter expansion (`$X`, `${X}`, `"$@"`). */
  readonly dynamic: boolean;
  /**
   * Contains an expansion that may become zero or several words: unquoted `$X`, or `"$@"`. A
   * double-quoted `"$X"` is dynamic but stays one word.
   */
  readonly splits: boolean;
  /** Contains an unquoted glob (`*`, `?`, `[...]`) or brace expansion (`{a,b}`, `{1..3}`). */
  readonly glob: boolean;
  /** `NAME=value` (or `NAME+=value`) with the name and `=` unquoted: a variable assignment. */
  readonly assignment: boolean;
}

/** A lexed segment: one simple command between separators. */
export interface LexedSegment {
  readonly words: ShellWord[];
  /** Why this segment cannot be matched; undefined when it can. */
  readonly unmatchable: string | undefined;
}

/** Structural limits beyond which a command is not analysed at all (fail closed). */
export const SHELL_LIMITS = {
  /** Longest command (UTF-16 code units) that is analysed. */
  maxCommandLength: 16_384,
  /** Most segments in one command. */
  maxSegments: 256,
  /** Most words in one segment. */
  maxWords: 1_024,
  /** Deepest nesting of `sh -c '...'` strings that is followed. */
  maxNesting: 4,
} as const;

// Character codes used by the scanner.
const TAB = 9;
const LF = 10;
const CR = 13;
const SPACE = 32;
const BANG = 33;
const DQUOTE = 34;
const HASH = 35;
const DOLLAR = 36;
const AMP = 38;
const SQUOTE = 39;
const LPAREN = 40;
const RPAREN = 41;
const STAR = 42;
const DOT = 46;
const SEMI = 59;
const LT = 60;
const GT = 62;
const QUESTION = 63;
const LBRACKET = 91;
const BACKSLASH = 92;
const RBRACKET = 93;
const BACKTICK = 96;
const LBRACE = 123;
const PIPE = 124;
const RBRACE = 125;
const DEL = 127;

/**
 * Invisible, bidirectional-control, unusual-space and other confusable code points. A human
 * approving a command cannot see them, and the shell does not treat them as separators.
 */
const INVISIBLE_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x0080, 0x00a0],
  [0x00ad, 0x00ad],
  [0x034f, 0x034f],
  [0x061c, 0x061c],
  [0x115f, 0x1160],
  [0x17b4, 0x17b5],
  [0x180b, 0x180f],
  [0x2000, 0x200f],
  [0x2028, 0x202f],
  [0x205f, 0x206f],
  [0x2800, 0x2800],
  [0x3000, 0x3000],
  [0x3164, 0x3164],
  [0xfe00, 0xfe0f],
  [0xfeff, 0xfeff],
  [0xffa0, 0xffa0],
  [0xfff0, 0xfffb],
  // High surrogate of the tag characters (U+E0000..U+E007F).
  [0xdb40, 0xdb40],
];

/** Whether a UTF-16 code unit above DEL is one of the {@link INVISIBLE_RANGES}. */
function isInvisible(c: number): boolean {
  for (const [lo, hi] of INVISIBLE_RANGES) if (c >= lo && c <= hi) return true;
  return false;
}

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*\+?=/;
const SIMPLE_PARAMETER = /^(?:#?[A-Za-z_][A-Za-z0-9_]*|#?[0-9]+|[@*#?$!-])$/;

function isNameStart(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95;
}

function isNameChar(c: number): boolean {
  return isNameStart(c) || (c >= 48 && c <= 57);
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/**
 * Lexes `src` into segments. Never throws: every problem becomes an unmatchable segment.
 */
export function lexShell(src: string): LexedSegment[] {
  if (src.length > SHELL_LIMITS.maxCommandLength) {
    return [
      { words: [], unmatchable: `command longer than ${SHELL_LIMITS.maxCommandLength} characters` },
    ];
  }
  const lexer = new Lexer(src);
  lexer.run();
  return lexer.segments;
}

class Lexer {
  readonly segments: LexedSegment[] = [];
  private words: ShellWord[] = [];
  private bad: string | undefined = undefined;

  // The word being built.
  private text = '';
  private inWord = false;
  private dynamic = false;
  private splits = false;
  private glob = false;
  /** Length of `text` when the first quoted or escaped character was appended (-1: none). */
  private firstQuoted = -1;
  /** Position in `text` of an unquoted `{` (brace expansion candidate), -1 if none. */
  private braceAt = -1;
  /** Whether an unquoted `[` was seen (a `]` after it makes a glob). */
  private bracketOpen = false;
  /** The next word is the target of a redirection. */
  private expectTarget = false;

  private i = 0;

  constructor(private readonly src: string) {}

  private flag(reason: string): void {
    if (this.bad === undefined) this.bad = reason;
  }

  private endWord(): void {
    if (!this.inWord) return;
    const text = this.text;
    let assignment = false;
    // Most words hold no `=`: skip the regular expression for them.
    const m = text.indexOf('=') > 0 ? ASSIGNMENT.exec(text) : null;
    if (m !== null && (this.firstQuoted < 0 || m[0].length <= this.firstQuoted)) assignment = true;
    // Quoted text that looks like shell code may be evaluated later by the program (array
    // subscripts in `printf -v`, `read`, `declare`, `[[ -eq ]]`, `trap`, ...): never match it.
    if (text.includes('$(') || text.includes('`'))
      this.flag('text that contains command substitution');
    if (this.words.length >= SHELL_LIMITS.maxWords) this.flag('too many words to analyse');
    else {
      this.words.push({
        text,
        redirect: false,
        redirectTarget: this.expectTarget,
        dynamic: this.dynamic,
        splits: this.splits,
        glob: this.glob,
        assignment,
      });
    }
    this.expectTarget = false;
    this.text = '';
    this.inWord = false;
    this.dynamic = false;
    this.splits = false;
    this.glob = false;
    this.firstQuoted = -1;
    this.braceAt = -1;
    this.bracketOpen = false;
  }

  private endSegment(): void {
    this.endWord();
    if (this.expectTarget) this.flag('redirection without a target');
    this.expectTarget = false;
    if (this.words.length > 0 || this.bad !== undefined) {
      if (this.segments.length >= SHELL_LIMITS.maxSegments) {
        const last = this.segments[this.segments.length - 1];
        if (last !== undefined && last.unmatchable === undefined) {
          this.segments[this.segments.length - 1] = {
            words: last.words,
            unmatchable: 'too many segments to analyse',
          };
        }
      } else {
        this.segments.push({ words: this.words, unmatchable: this.bad });
      }
    }
    this.words = [];
    this.bad = undefined;
  }

  private quoted(s: string): void {
    if (this.firstQuoted < 0) this.firstQuoted = this.text.length;
    this.text += s;
    this.inWord = true;
  }

  private pushRedirect(op: string): void {
    this.endWord();
    if (this.expectTarget) this.flag('redirection without a target');
    this.words.push(redirectWord(op));
    this.expectTarget = true;
  }

  run(): void {
    const src = this.src;
    const n = src.length;
    while (this.i < n) {
      const c = src.charCodeAt(this.i);
      if (c === SPACE || c === TAB) {
        this.endWord();
        this.i++;
      } else if (c === LF || c === CR) {
        this.endSegment();
        this.i++;
      } else if (c === SEMI) {
        const next = src.charCodeAt(this.i + 1);
        if (next === SEMI || next === AMP) {
          this.flag('case-statement terminator');
          this.i += 2;
        } else this.i++;
        this.endSegment();
      } else if (c === AMP) {
        const next = src.charCodeAt(this.i + 1);
        if (next === AMP) {
          this.i += 2;
          this.endSegment();
        } else if (next === GT) {
          const append = src.charCodeAt(this.i + 2) === GT;
          this.i += append ? 3 : 2;
          this.pushRedirect(append ? '&>>' : '&>');
        } else {
          this.i++;
          this.endSegment();
        }
      } else if (c === PIPE) {
        const next = src.charCodeAt(this.i + 1);
        this.i += next === PIPE || next === AMP ? 2 : 1;
        this.endSegment();
      } else if (c === LPAREN || c === RPAREN) {
        this.flag(c === LPAREN ? 'subshell, function definition or array' : 'subshell or grouping');
        this.endWord();
        this.i++;
      } else if (c === LT || c === GT) {
        this.redirect(c);
      } else if (c === SQUOTE) {
        const end = src.indexOf("'", this.i + 1);
        if (end < 0) {
          this.flag('unbalanced single quote');
          this.quoted(src.slice(this.i + 1));
          this.i = n;
        } else {
          this.quoted(src.slice(this.i + 1, end));
          this.i = end + 1;
        }
      } else if (c === DQUOTE) {
        this.doubleQuoted();
      } else if (c === BACKSLASH) {
        this.backslash();
      } else if (c === BACKTICK) {
        this.flag('command substitution');
        const end = findUnescaped(src, BACKTICK, this.i + 1);
        this.text += src.slice(this.i, end < 0 ? n : end + 1);
        this.inWord = true;
        this.dynamic = true;
        this.splits = true;
        this.i = end < 0 ? n : end + 1;
        if (end < 0) this.flag('unbalanced backtick');
      } else if (c === DOLLAR) {
        this.dollar(false);
      } else if (c === HASH && !this.inWord) {
        // A comment runs to the end of the line; the shell ignores it.
        const end = src.indexOf('\n', this.i);
        this.i = end < 0 ? n : end;
      } else {
        this.plainRun();
      }
    }
    if (this.expectTarget && !this.inWord) this.flag('redirection without a target');
    this.endSegment();
  }

  /** Consumes ordinary characters, noting globs, brace expansions and suspicious code points. */
  private plainRun(): void {
    const src = this.src;
    const n = src.length;
    const start = this.i;
    let i = start;
    for (; i < n; i++) {
      const c = src.charCodeAt(i);
      if (
        c === SPACE ||
        c === TAB ||
        c === LF ||
        c === CR ||
        c === SEMI ||
        c === AMP ||
        c === PIPE ||
        c === LPAREN ||
        c === RPAREN ||
        c === LT ||
        c === GT ||
        c === SQUOTE ||
        c === DQUOTE ||
        c === BACKSLASH ||
        c === BACKTICK ||
        c === DOLLAR
      ) {
        break;
      }
      if (c < SPACE || c === DEL) this.flag('control character');
      else if (c > DEL && isInvisible(c)) this.flag('invisible or confusable character');
      else if (c === STAR || c === QUESTION) this.glob = true;
      else if (c === LBRACKET) this.bracketOpen = true;
      else if (c === RBRACKET && this.bracketOpen) this.glob = true;
      else if (c === LBRACE) {
        if (this.braceAt < 0) this.braceAt = this.text.length + (i - start);
      } else if (c === RBRACE && this.braceAt >= 0) {
        const inner = this.text + src.slice(start, i);
        const body = inner.slice(this.braceAt + 1);
        if (body.includes(',') || body.includes('..')) this.glob = true;
      }
    }
    if (i > start) {
      this.text += src.slice(start, i);
      this.inWord = true;
    }
    this.i = i;
  }

  private backslash(): void {
    const src = this.src;
    const next = src.charCodeAt(this.i + 1);
    if (Number.isNaN(next)) {
      this.flag('trailing backslash');
      this.i++;
      return;
    }
    if (next === LF) {
      // A line continuation. Between words it is whitespace; inside a word it joins two pieces of
      // text into one token that no reviewer sees as such.
      const after = src.charCodeAt(this.i + 2);
      if (
        this.inWord ||
        !(Number.isNaN(after) || after === SPACE || after === TAB || after === LF)
      ) {
        this.flag('line continuation inside a word');
      }
      this.i += 2;
      return;
    }
    if (next === CR) {
      this.flag('escaped carriage return');
      this.i += 2;
      return;
    }
    const ch = String.fromCodePoint(src.codePointAt(this.i + 1) as number);
    if (next < SPACE || next === DEL) this.flag('control character');
    else if (next > DEL && isInvisible(next)) this.flag('invisible or confusable character');
    this.quoted(ch);
    this.i += 1 + ch.length;
  }

  private doubleQuoted(): void {
    const src = this.src;
    const n = src.length;
    if (this.firstQuoted < 0) this.firstQuoted = this.text.length;
    this.inWord = true;
    let i = this.i + 1;
    let run = i;
    while (i < n) {
      const c = src.charCodeAt(i);
      if (c === DQUOTE) {
        this.text += src.slice(run, i);
        this.i = i + 1;
        return;
      }
      if (c === BACKSLASH) {
        const next = src.charCodeAt(i + 1);
        if (next === DOLLAR || next === BACKTICK || next === DQUOTE || next === BACKSLASH) {
          this.text += src.slice(run, i) + src[i + 1];
          i += 2;
          run = i;
          continue;
        }
        if (next === LF) {
          this.flag('line continuation inside a word');
          this.text += src.slice(run, i);
          i += 2;
          run = i;
          continue;
        }
        i++;
        continue;
      }
      if (c === BACKTICK) {
        this.flag('command substitution');
        const end = findUnescaped(src, BACKTICK, i + 1);
        if (end < 0) {
          this.flag('unbalanced backtick');
          i = n;
          break;
        }
        i = end + 1;
        this.dynamic = true;
        continue;
      }
      if (c === DOLLAR) {
        this.text += src.slice(run, i);
        this.i = i;
        this.dollar(true);
        i = this.i;
        run = i;
        continue;
      }
      if (c < SPACE && c !== TAB && c !== LF) this.flag('control character');
      else if (c === DEL) this.flag('control character');
      else if (c > DEL && isInvisible(c)) this.flag('invisible or confusable character');
      i++;
    }
    this.flag('unbalanced double quote');
    this.text += src.slice(run, n);
    this.i = n;
  }

  /** `$...` at this.i: parameter expansion, substitution, arithmetic or ANSI-C quoting. */
  private dollar(inDouble: boolean): void {
    const src = this.src;
    const n = src.length;
    const start = this.i;
    const next = src.charCodeAt(start + 1);
    this.inWord = true;
    if (next === LPAREN) {
      this.flag(
        src.charCodeAt(start + 2) === LPAREN ? 'arithmetic expansion' : 'command substitution',
      );
      this.expansion(start, findClosing(src, start + 1, LPAREN, RPAREN), !inDouble);
      return;
    }
    if (next === LBRACKET) {
      this.flag('arithmetic expansion');
      this.expansion(start, findClosing(src, start + 1, LBRACKET, RBRACKET), !inDouble);
      return;
    }
    if (next === LBRACE) {
      const end = findClosing(src, start + 1, LBRACE, RBRACE);
      const body = src.slice(start + 2, end - 1);
      if (src.charCodeAt(end - 1) !== RBRACE) this.flag('unbalanced parameter expansion');
      else if (!SIMPLE_PARAMETER.test(body)) this.flag('parameter expansion with operators');
      this.expansion(start, end, !inDouble || body === '@');
      return;
    }
    if (!inDouble && next === SQUOTE) {
      this.flag('ANSI-C quoting');
      const end = findUnescaped(src, SQUOTE, start + 2);
      this.text += src.slice(start, end < 0 ? n : end + 1);
      this.i = end < 0 ? n : end + 1;
      if (end < 0) this.flag('unbalanced single quote');
      return;
    }
    if (!inDouble && next === DQUOTE) {
      this.flag('locale-translated string');
      this.text += '$';
      this.i = start + 1;
      return;
    }
    if (isNameStart(next)) {
      let j = start + 2;
      while (j < n && isNameChar(src.charCodeAt(j))) j++;
      this.expansion(start, j, !inDouble);
      return;
    }
    if (
      isDigit(next) ||
      next === 64 ||
      next === STAR ||
      next === HASH ||
      next === QUESTION ||
      next === DOLLAR ||
      next === BANG ||
      next === 45
    ) {
      this.expansion(start, start + 2, !inDouble || next === 64);
      return;
    }
    // A lone `$` is literal.
    this.text += '$';
    this.i = start + 1;
  }

  /** Appends the expansion `src[start, end)` to the word and moves past it. */
  private expansion(start: number, end: number, splits: boolean): void {
    this.text += this.src.slice(start, end);
    this.dynamic = true;
    if (splits) this.splits = true;
    this.i = end;
  }

  private redirect(c: number): void {
    const src = this.src;
    // An all-digit word glued to the operator is its file descriptor (`2>`).
    let prefix = '';
    if (this.inWord) {
      if (this.firstQuoted < 0 && /^[0-9]+$/.test(this.text)) {
        prefix = this.text;
        this.text = '';
        this.inWord = false;
        this.dynamic = false;
        this.splits = false;
        this.glob = false;
      } else if (/^\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(this.text)) {
        this.flag('named file descriptor redirection');
      }
    }
    const i = this.i;
    const n1 = src.charCodeAt(i + 1);
    const n2 = src.charCodeAt(i + 2);
    if (n1 === LPAREN) {
      this.flag('process substitution');
      const end = findClosing(src, i + 1, LPAREN, RPAREN);
      this.endWord();
      this.i = end;
      return;
    }
    let op: string;
    if (c === LT) {
      if (n1 === LT) {
        if (n2 === LT) op = '<<<';
        else {
          this.flag('here-document');
          op = n2 === 45 ? '<<-' : '<<';
        }
      } else if (n1 === GT) op = '<>';
      else if (n1 === AMP) op = '<&';
      else op = '<';
    } else {
      if (n1 === GT) op = '>>';
      else if (n1 === PIPE) op = '>|';
      else if (n1 === AMP) op = '>&';
      else op = '>';
    }
    this.i = i + op.length;
    if (op === '>&' || op === '<&') {
      // `2>&1`, `>&-`: the descriptor is part of the operator.
      let j = this.i;
      while (j < src.length && isDigit(src.charCodeAt(j))) j++;
      if (j === this.i && src.charCodeAt(j) === 45) j++;
      if (j > this.i) {
        const ch = src.charCodeAt(j);
        if (
          Number.isNaN(ch) ||
          ch === SPACE ||
          ch === TAB ||
          ch === LF ||
          ch === CR ||
          ch === SEMI ||
          ch === AMP ||
          ch === PIPE ||
          ch === LT ||
          ch === GT ||
          ch === RPAREN
        ) {
          this.endWord();
          this.words.push(redirectWord(prefix + op + src.slice(this.i, j)));
          this.i = j;
          return;
        }
      }
    }
    this.pushRedirect(prefix + op);
  }
}

/** A redirection operator as a word of its own. */
function redirectWord(op: string): ShellWord {
  return {
    text: op,
    redirect: true,
    redirectTarget: false,
    dynamic: false,
    splits: false,
    glob: false,
    assignment: false,
  };
}

/** Index of the next unescaped `code` at or after `from`, or -1. */
function findUnescaped(src: string, code: number, from: number): number {
  for (let i = from; i < src.length; i++) {
    const c = src.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === code) return i;
  }
  return -1;
}

/** The index just past the bracket that closes the one at `open` (best effort; end of input). */
function findClosing(src: string, open: number, openCode: number, closeCode: number): number {
  let depth = 0;
  for (let i = open; i < src.length; i++) {
    const c = src.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === openCode) depth++;
    else if (c === closeCode) {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return src.length;
}

/** Whether a redirection target names a dotfile (`~/.bashrc`, `.git/hooks/x`, `a/.ssh/k`). */
export function isDotfilePath(path: string): boolean {
  let start = 0;
  for (;;) {
    const slash = path.indexOf('/', start);
    const part = slash < 0 ? path.slice(start) : path.slice(start, slash);
    if (part.length > 1 && part.charCodeAt(0) === DOT && part !== '..') return true;
    if (slash < 0) return false;
    start = slash + 1;
  }
}
