/**
 * The file builtins' one implementation (read_file, list_dir, grep, write_file), as plain
 * JavaScript text that needs nothing but Node's own modules, so that both executions run the same
 * code:
 * - sandboxed (the default): {@link FILE_HELPER_PROGRAM} runs it under `node -e` in a helper whose
 *   mount namespace holds only one call scope (see `FileScopePool`); no file of ours has to be
 *   visible there, and whatever a racing rename makes a path point at, only that scope and the
 *   read-only system directories can be reached;
 * - in process (EXECUTOR_SANDBOX=off): `file-ops-in-process.ts` evaluates {@link FILE_OPS_SOURCE}
 *   once and calls `runOp` directly, or in a worker thread when the call has a deadline (grep's
 *   model-written regex must be killable).
 *
 * The rules: a path resolved through its symlinks and checked against the scope's roots,
 * `O_NOFOLLOW` on the last component, the binary sniff, the byte and entry caps. The check is the
 * prediction that gives the model the same errors either way; in the sandbox the mount namespace
 * is the boundary.
 *
 * `runOp(op, args)` answers `{ ok: true, result }` or `{ ok: false, error: Refusal }`. A refusal
 * is `{ kind: 'outside' }`, `{ kind: 'binary' }` or `{ kind: 'errno', errno? }`; the executor
 * turns it into the builtin's error (error codes are defined in contracts, not here). Deadlines
 * and cancellation are the executor's: it kills the helper (or the worker).
 */
export const FILE_OPS_SOURCE = String.raw`'use strict';
// Synchronous calls throughout: a helper serves one request at a time, and a round trip through
// libuv's thread pool per call would cost more than the call.
const fs = require('node:fs');
const { constants } = fs;
const path = require('node:path');
const { StringDecoder } = require('node:string_decoder');

const NOFOLLOW = constants.O_NOFOLLOW;
// Linux's O_PATH (Node does not export it): a directory held only to look names up in.
const O_PATH = 0o10000000;
const MAX_SYMLINK_HOPS = 40;
const CHUNK_BYTES = 64 * 1024;
const BINARY_SNIFF_BYTES = 8 * 1024;
const SKIPPED_DIRS = new Set(['.git', '.hg', '.svn']);
const MAX_LINE_CHARS = 500;

class Refusal {
  constructor(error) { this.error = error; }
}
const outside = () => new Refusal({ kind: 'outside' });
const errnoOf = (err) => new Refusal({ kind: 'errno', ...(err && err.code ? { errno: err.code } : {}) });

function isInside(root, p) {
  const rel = path.relative(root, p);
  return rel === '' || (rel !== '..' && !rel.startsWith('..' + path.sep) && !path.isAbsolute(rel));
}

function realpathLenient(abs, hops) {
  try {
    return fs.realpathSync(abs);
  } catch (err) {
    if (err.code === 'ELOOP') throw outside();
    if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR') throw errnoOf(err);
  }
  const parent = path.dirname(abs);
  if (parent === abs) return abs;
  const realParent = realpathLenient(parent, hops);
  const candidate = path.join(realParent, path.basename(abs));
  let isLink = false;
  try {
    isLink = fs.lstatSync(candidate).isSymbolicLink();
  } catch {
    return candidate;
  }
  if (!isLink) return candidate;
  if (hops >= MAX_SYMLINK_HOPS) throw outside();
  let target;
  try {
    target = fs.readlinkSync(candidate);
  } catch (err) {
    throw errnoOf(err);
  }
  return realpathLenient(path.resolve(realParent, target), hops + 1);
}

function resolveInScope(roots, cwd, requested) {
  if (requested.includes('\0')) throw outside();
  const real = realpathLenient(path.resolve(cwd, requested), 0);
  for (const root of roots) {
    if (isInside(realpathLenient(root, 0), real)) return real;
  }
  throw outside();
}

function read({ cwd, roots, path: requested, first, last, cap }) {
  const real = resolveInScope(roots, cwd, requested);
  let fd;
  try {
    fd = fs.openSync(real, constants.O_RDONLY | NOFOLLOW);
  } catch (err) {
    throw errnoOf(err);
  }
  try {
    if (!fs.fstatSync(fd).isFile()) throw new Refusal({ kind: 'errno', errno: 'EISDIR' });
    return readLines(fd, first, last === null ? Number.POSITIVE_INFINITY : last, cap);
  } catch (err) {
    throw err instanceof Refusal ? err : errnoOf(err);
  } finally {
    fs.closeSync(fd);
  }
}

function readLines(fd, first, last, cap) {
  const decoder = new StringDecoder('utf8');
  const buf = Buffer.alloc(CHUNK_BYTES);
  const out = [];
  let outBytes = 0;
  let line = 1;
  let lastReturned = first - 1;
  let truncated = false;
  let sniffed = 0;
  let done = false;
  const take = (text) => {
    const bytes = Buffer.byteLength(text);
    if (outBytes + bytes <= cap) {
      out.push(text);
      outBytes += bytes;
      return true;
    }
    const cut = new StringDecoder('utf8').write(Buffer.from(text).subarray(0, cap - outBytes));
    out.push(cut);
    outBytes += Buffer.byteLength(cut);
    truncated = true;
    return false;
  };
  while (!done) {
    const bytesRead = fs.readSync(fd, buf, 0, CHUNK_BYTES, null);
    if (bytesRead === 0) break;
    const chunk = buf.subarray(0, bytesRead);
    if (sniffed < BINARY_SNIFF_BYTES) {
      const window = chunk.subarray(0, BINARY_SNIFF_BYTES - sniffed);
      if (window.includes(0)) throw new Refusal({ kind: 'binary' });
      sniffed += window.length;
    }
    const text = decoder.write(chunk);
    let start = 0;
    while (start <= text.length) {
      const nl = text.indexOf('\n', start);
      const piece = nl === -1 ? text.slice(start) : text.slice(start, nl + 1);
      if (piece.length > 0 && line >= first && line <= last) {
        lastReturned = line;
        if (!take(piece)) {
          done = true;
          break;
        }
      }
      if (nl === -1) break;
      line += 1;
      if (line > last) {
        done = true;
        break;
      }
      start = nl + 1;
    }
  }
  if (!done) {
    const tail = decoder.end();
    if (tail && line >= first && line <= last) {
      lastReturned = line;
      take(tail);
    }
  }
  return { content: out.join(''), endLine: lastReturned, truncated };
}

function list({ cwd, roots, path: requested, cap }) {
  const real = resolveInScope(roots, cwd, requested);
  let dir;
  try {
    dir = fs.opendirSync(real);
  } catch (err) {
    throw errnoOf(err);
  }
  const entries = [];
  let truncated = false;
  try {
    for (let d = dir.readSync(); d !== null; d = dir.readSync()) {
      if (entries.length >= cap) {
        truncated = true;
        break;
      }
      const type = d.isSymbolicLink() ? 'symlink' : d.isDirectory() ? 'dir' : d.isFile() ? 'file' : 'other';
      const entry = { name: d.name, type };
      if (type === 'file') {
        try {
          entry.size = fs.lstatSync(path.join(real, d.name)).size;
        } catch {
          // gone since it was listed
        }
      }
      entries.push(entry);
    }
  } catch (err) {
    throw errnoOf(err);
  } finally {
    dir.closeSync();
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { entries, truncated };
}

function readText(file, maxBytes) {
  let fd;
  try {
    fd = fs.openSync(file, constants.O_RDONLY | NOFOLLOW);
  } catch {
    return undefined;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > maxBytes) return undefined;
    const buf = fs.readFileSync(fd);
    if (buf.subarray(0, BINARY_SNIFF_BYTES).includes(0)) return undefined;
    return buf.toString('utf8');
  } catch {
    return undefined;
  } finally {
    fs.closeSync(fd);
  }
}

function matchLines(re, text, max) {
  const hits = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length && hits.length < max; i += 1) {
    let line = lines[i];
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (i === lines.length - 1 && line === '') break;
    if (re.test(line)) hits.push([i + 1, line.length > MAX_LINE_CHARS ? line.slice(0, MAX_LINE_CHARS) : line]);
  }
  return hits;
}

function grep({ cwd, roots, path: requested, pattern, flags, maxMatches, maxFiles, maxFileBytes }) {
  const root = resolveInScope(roots, cwd, requested);
  const re = new RegExp(pattern, flags);
  const result = { matches: [], filesScanned: 0, filesSkipped: 0, truncated: false };
  let rootStat;
  try {
    rootStat = fs.statSync(root);
  } catch (err) {
    throw errnoOf(err);
  }
  const stack = rootStat.isDirectory() ? [''] : [];
  const files = rootStat.isFile() ? [''] : [];
  const scanFile = (rel) => {
    if (result.filesScanned + result.filesSkipped >= maxFiles) {
      result.truncated = true;
      return false;
    }
    const text = readText(path.join(root, rel), maxFileBytes);
    if (text === undefined) {
      result.filesSkipped += 1;
      return true;
    }
    result.filesScanned += 1;
    const shown = rel === '' ? requested : path.join(requested, rel);
    for (const [line, lineText] of matchLines(re, text, maxMatches - result.matches.length))
      result.matches.push({ file: shown, line, text: lineText });
    if (result.matches.length >= maxMatches) {
      result.truncated = true;
      return false;
    }
    return true;
  };
  for (const f of files) if (!scanFile(f)) return result;
  while (stack.length > 0) {
    const rel = stack.pop();
    let entries;
    try {
      entries = fs.readdirSync(path.join(root, rel), { withFileTypes: true });
    } catch {
      continue;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const dirs = [];
    for (const e of entries) {
      const childRel = rel === '' ? e.name : path.join(rel, e.name);
      if (e.isDirectory()) {
        if (!SKIPPED_DIRS.has(e.name)) dirs.push(childRel);
      } else if (e.isFile()) {
        if (!scanFile(childRel)) return result;
      }
    }
    for (let i = dirs.length - 1; i >= 0; i -= 1) stack.push(dirs[i]);
  }
  return result;
}

/**
 * Opens the directory \`dir\` (absolute, and real: no symlink on it) one component at a time from
 * \`/\`, following no symlink: each component is looked up in the directory opened before it
 * (through \`/proc/self/fd\`, Node's \`openat\`), so a component swapped for a symlink meanwhile fails
 * the open instead of leading it elsewhere. With \`create\`, missing components are made on the way.
 */
function openDirNoFollow(dir, create) {
  const flags = O_PATH | constants.O_DIRECTORY | NOFOLLOW;
  let fd = fs.openSync('/', flags);
  try {
    for (const name of dir.split('/').filter(Boolean)) {
      const at = '/proc/self/fd/' + fd + '/' + name;
      let next;
      try {
        next = fs.openSync(at, flags);
      } catch (err) {
        if (!create || err.code !== 'ENOENT') throw err;
        try {
          fs.mkdirSync(at);
        } catch (made) {
          if (made.code !== 'EEXIST') throw made;
        }
        next = fs.openSync(at, flags);
      }
      fs.closeSync(fd);
      fd = next;
    }
    return fd;
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

/**
 * Writes at \`target\`: the real path the executor resolved and checked against the scope and the
 * protected paths. No symlink on it is followed here, so what is written is the file at that very
 * path — a folder on the way swapped for a link to \`.git\` between the executor's check and this
 * write refuses the write (\`outside\`) instead of writing through it.
 */
function write({ roots, target, content, mode, createDirs }) {
  if (typeof target !== 'string' || !path.isAbsolute(target) || target.includes('\0')) throw outside();
  if (path.normalize(target) !== target || !roots.some((root) => isInside(realpathLenient(root, 0), target))) throw outside();
  let dirFd;
  try {
    dirFd = openDirNoFollow(path.dirname(target), createDirs);
  } catch (err) {
    throw err.code === 'ELOOP' || err.code === 'ENOTDIR' ? outside() : errnoOf(err);
  }
  const at = '/proc/self/fd/' + dirFd + '/' + path.basename(target);
  let created = false;
  try {
    fs.lstatSync(at);
  } catch {
    created = true;
  }
  const flags =
    constants.O_WRONLY | constants.O_CREAT | NOFOLLOW |
    (mode === 'append' ? constants.O_APPEND : 0) |
    (mode === 'overwrite' ? constants.O_TRUNC : 0) |
    (mode === 'create' ? constants.O_EXCL : 0);
  let fd;
  try {
    fd = fs.openSync(at, flags, 0o644);
  } catch (err) {
    throw err.code === 'ELOOP' ? outside() : errnoOf(err);
  } finally {
    fs.closeSync(dirFd);
  }
  try {
    fs.writeFileSync(fd, content, 'utf8');
  } catch (err) {
    throw errnoOf(err);
  } finally {
    fs.closeSync(fd);
  }
  return { created };
}

const OPS = { read, list, grep, write, ping: () => 'pong' };

function runOp(op, args) {
  try {
    const run = Object.prototype.hasOwnProperty.call(OPS, op) ? OPS[op] : undefined;
    if (!run) throw new Refusal({ kind: 'errno' });
    return { ok: true, result: run(args) };
  } catch (err) {
    return { ok: false, error: err instanceof Refusal ? err.error : errnoOf(err).error };
  }
}
`;

/**
 * The sandboxed helper's whole program. Protocol: one JSON request per line on stdin,
 * `{ id, op, args }`; one JSON reply per line on stdout, `{ id, ...runOp(op, args) }`, in order.
 */
export const FILE_HELPER_PROGRAM =
  FILE_OPS_SOURCE +
  String.raw`
function handle(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    process.exit(2);
  }
  process.stdout.write(JSON.stringify({ id: request.id, ...runOp(request.op, request.args) }) + '\n');
}

let parts = [];
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  let start = 0;
  for (let nl = chunk.indexOf('\n'); nl !== -1; nl = chunk.indexOf('\n', start)) {
    parts.push(chunk.slice(start, nl));
    const line = parts.join('');
    parts = [];
    start = nl + 1;
    handle(line);
  }
  if (start < chunk.length) parts.push(chunk.slice(start));
});
process.stdin.on('end', () => process.exit(0));
`;
