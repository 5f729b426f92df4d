// Writes test-durations.json — each test file's duration in seconds, by path from the repository
// root — from a whole run's `npx jest --json --outputFile=<file>`: the order jest.sequencer.js
// gives a run that has no times of its own (a fresh clone, CI).
// Usage: node scripts/test-durations.cjs <jest-results.json>
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const [input] = process.argv.slice(2);
if (!input) {
  console.error('usage: node scripts/test-durations.cjs <jest-results.json>');
  process.exit(2);
}
const results = JSON.parse(fs.readFileSync(input, 'utf8'));
const durations = {};
for (const file of results.testResults) {
  const ms = file.perfStats?.runtime ?? file.endTime - file.startTime;
  if (!Number.isFinite(ms)) continue;
  const name = path.relative(root, file.name).split(path.sep).join('/');
  durations[name] = Math.round(ms / 100) / 10;
}
const sorted = Object.fromEntries(Object.entries(durations).sort(([a], [b]) => (a < b ? -1 : 1)));
fs.writeFileSync(path.join(root, 'test-durations.json'), `${JSON.stringify(sorted, null, 2)}\n`);
console.log(`test-durations.json: ${Object.keys(sorted).length} files`);
