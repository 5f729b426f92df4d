// The order of a run across every project (jest.config.js): jest's own — last run's failures
// first, then the slowest by last run's times — with the times of a recorded run
// (test-durations.json, seconds per file) standing in where jest has none of its own (a fresh
// clone, CI): the longest files start first and the cheap ones fill the workers at the end. A file
// in neither (a new spec) runs before the timed ones, integration specs first, the largest first.
// The order only places work; a stale or missing entry costs time, never a result.
// Refresh the record from a run with `node scripts/test-durations.cjs <jest --json output>`.
const path = require('node:path');
const Sequencer = require('@jest/test-sequencer').default;

const recorded = require('./test-durations.json');

const isIntegration = (test) => /\.int\.spec\.ts$/.test(test.path);

class RecordedTimesFirst extends Sequencer {
  time(test) {
    const own = super.time(test);
    if (own != null) return own;
    const seconds = recorded[path.relative(__dirname, test.path).split(path.sep).join('/')];
    return seconds == null ? undefined : seconds * 1000;
  }

  sort(tests) {
    const sorted = super.sort(tests);
    const untimed = sorted.filter((t) => t.duration == null && !this.hasFailed(t));
    const first = new Set([...untimed.filter(isIntegration), ...untimed]);
    const rest = sorted.filter((t) => !first.has(t));
    const failed = rest.filter((t) => this.hasFailed(t));
    return [...failed, ...first, ...rest.filter((t) => !this.hasFailed(t))];
  }
}

module.exports = RecordedTimesFirst;
