import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/**
 * `npm start` runs the TypeScript sources through `scripts/from-source.cjs`, which caches each
 * compiled module and loads the cached text instead of the source next time. Its default place is
 * a predictable name in the shared temp directory: one made first by someone else (writable by
 * others) must never be read — what is planted there would run as the services.
 */
const FROM_SOURCE = path.resolve(__dirname, '..', '..', 'scripts', 'from-source.cjs');

let work: string;
let source: string;
beforeEach(() => {
  work = mkdtempSync(path.join(os.tmpdir(), 'from-source-cache-'));
  source = path.join(work, 'service.ts');
  writeFileSync(source, "const who: string = 'genuine';\nconsole.log(who);\n");
});
afterEach(() => rmSync(work, { recursive: true, force: true }));

const run = (cache: string) =>
  execFileSync(process.execPath, ['--require', FROM_SOURCE, source], {
    env: { ...process.env, TOOLGATE_FROM_SOURCE_CACHE: cache },
    encoding: 'utf8',
  }).trim();

it('keeps compiled modules in a cache of its own, made private', () => {
  const cache = path.join(work, 'cache');
  expect(run(cache)).toBe('genuine');
  expect(readdirSync(cache)).toHaveLength(1);
  expect(run(cache)).toBe('genuine');
});

it('reads nothing from a cache directory others may write, and writes nothing there', () => {
  const cache = path.join(work, 'shared');
  // Compiled once into a private cache, to learn the entry's name; then the same entry planted in
  // a directory anyone may write.
  expect(run(path.join(work, 'private'))).toBe('genuine');
  const [entry] = readdirSync(path.join(work, 'private'));
  mkdirSync(cache);
  chmodSync(cache, 0o777);
  writeFileSync(path.join(cache, entry!), "console.log('planted');\n");
  expect(run(cache)).toBe('genuine');
  expect(readdirSync(cache)).toEqual([entry]);
});
