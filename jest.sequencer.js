// The order of a run across every project (jest.config.js): jest's own — last run's failures
// first, then the slowest by last run's times — except that a file jest has no time for yet (a
// fresh clone, CI) runs integration specs before pure ones, the largest first. Integration specs
// take the longest, and one of them started last would leave the other workers idle at the end.
const Sequencer = require('@jest/test-sequencer').default;

const isIntegration = (test) => /\.int\.spec\.ts$/.test(test.path);

class IntegrationFirst extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    const untimed = sorted.filter((t) => t.duration == null && !this.hasFailed(t));
    const first = new Set([...untimed.filter(isIntegration), ...untimed]);
    const rest = sorted.filter((t) => !first.has(t));
    const failed = rest.filter((t) => this.hasFailed(t));
    return [...failed, ...first, ...rest.filter((t) => !this.hasFailed(t))];
  }
}

module.exports = IntegrationFirst;
