#!/usr/bin/env node
/**
 * Summarises V8 CPU profiles (`node --cpu-prof`): self time by function and by where the code
 * lives (our packages by path, dependencies by package), and inclusive time of chosen functions.
 * Usage: node scripts/cpu-profile-summary.cjs <file.cpuprofile>... [--top N] [--match REGEX]
 * Several files are added together (e.g. the five services' profiles of one split run).
 */
const fs = require('node:fs');

const args = process.argv.slice(2);
const files = args.filter((a, i) => !a.startsWith('--') && !(args[i - 1] ?? '').startsWith('--'));
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const top = Number(opt('top', 40));
const match = opt('match', undefined);

function where(url) {
  if (!url) return '(native/v8)';
  const u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = u.slice(nm + 'node_modules/'.length).split('/');
    return `dep:${rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (u.startsWith('node:')) return `node:${u.slice(5).split('/')[0]}`;
  const m = /\/(libs|services|contracts|test)\/([^/]+)?/.exec(u);
  if (m) return m[1] === 'contracts' ? 'contracts' : `${m[1]}/${m[2]}`;
  return u.includes('/') ? '(other js)' : `node:${u}`;
}

const selfByOwner = new Map();
const selfByFn = new Map();
const selfByWhere = new Map();
const inclusive = new Map();
let total = 0;
for (const file of files) {
  const p = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (p.head) {
    // A sampling heap profile: bytes allocated (self) per function instead of time.
    const walk = (n) => {
      const cf = n.callFrame;
      const kb = n.selfSize / 1024;
      total += kb;
      const fn = `${cf.functionName || '(anonymous)'} ${cf.url ? cf.url.replace(/.*\/(node_modules\/)?/, '') : ''}:${cf.lineNumber + 1}`;
      selfByFn.set(fn, (selfByFn.get(fn) ?? 0) + kb);
      const w = where(cf.url) + (cf.url ? '' : ` ${cf.functionName}`);
      selfByWhere.set(w, (selfByWhere.get(w) ?? 0) + kb);
      for (const c of n.children ?? []) walk(c);
    };
    walk(p.head);
    continue;
  }
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const dt = new Map();
  for (let i = 0; i < p.samples.length; i++) {
    const d = (p.timeDeltas[i + 1] ?? p.timeDeltas[i] ?? 0) / 1000;
    dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + d);
  }
  for (const [id, ms] of dt) {
    const n = byId.get(id);
    const cf = n.callFrame;
    if (cf.functionName === '(idle)' || (cf.functionName === '(program)' && false)) continue;
    total += ms;
    const fn = `${cf.functionName || '(anonymous)'} ${cf.url ? cf.url.replace(/.*\/(node_modules\/)?/, '') : ''}:${cf.lineNumber + 1}`;
    selfByFn.set(fn, (selfByFn.get(fn) ?? 0) + ms);
    const w = where(cf.url) + (cf.url ? '' : ` ${cf.functionName}`);
    selfByWhere.set(w, (selfByWhere.get(w) ?? 0) + ms);
    // The nearest frame of ours up the stack: which service (or library) the work was done for.
    let owner = '(no frame of ours)';
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const w = where(byId.get(cur).callFrame.url);
      if (w.startsWith('services/') || w.startsWith('test/')) {
        owner = w;
        break;
      }
      if ((w.startsWith('libs/') || w === 'contracts') && owner === '(no frame of ours)')
        owner = `${w} (first frame)`;
    }
    if (cf.functionName === '(garbage collector)') owner = '(garbage collector)';
    selfByOwner.set(owner, (selfByOwner.get(owner) ?? 0) + ms);
    if (match) {
      // inclusive: once per distinct matching frame on the stack
      const seen = new Set();
      for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
        const c = byId.get(cur).callFrame;
        const key = `${c.functionName} ${c.url.replace(/.*\//, '')}:${c.lineNumber + 1}`;
        if (new RegExp(match).test(key) && !seen.has(key)) {
          seen.add(key);
          inclusive.set(key, (inclusive.get(key) ?? 0) + ms);
        }
      }
    }
  }
}
const pct = (ms) => `${((100 * ms) / total).toFixed(1).padStart(5)}%`;
const print = (title, map, n) => {
  console.log(`\n${title}`);
  for (const [k, ms] of [...map].sort((a, b) => b[1] - a[1]).slice(0, n))
    console.log(`${pct(ms)} ${ms.toFixed(0).padStart(7)} ms  ${k}`);
};
console.log(`total non-idle sampled: ${total.toFixed(0)} ms (KiB for heap profiles)`);
print('self time by location', selfByWhere, top);
if (selfByOwner.size) print('time by owner (nearest service frame up the stack)', selfByOwner, top);
print('self time by function', selfByFn, top);
if (match) print(`inclusive time of /${match}/`, inclusive, top);
