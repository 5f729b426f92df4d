import { join } from 'node:path';
import { ErrorCode } from '../src/errors';
import { compileJsonSchema } from '../src/schema-spec';
import { configError } from './support/config-error';
import { fromDraft7, loadSuite, needsRemote, registrationOf } from './support/schema-test-suite';

/**
 * The official JSON Schema Test Suite's required draft-07 tests (vendored, see the fixture's
 * docs/architecture.md for why not draft 2020-12), each group's schema translated into draft 2020-12 and
 * registered as a tool's parameters through the server-side compiler, each test's instance
 * checked as a call's input. A case gives the suite's verdict or the test fails; a group that
 * needs a remote document must be refused with `config` (nothing is fetched).
 */
const suite = loadSuite(join(__dirname, 'fixtures/json-schema-test-suite/draft7'));

let group = 0;
const cases = suite.flatMap(({ file, groups }) =>
  groups.map((g) => {
    const schema = fromDraft7(g.schema);
    return {
      file,
      description: g.description,
      tests: g.tests,
      remote: needsRemote(file, { ...g, schema }),
      registration: registrationOf(schema, ++group),
    };
  }),
);

describe.each([...new Set(cases.map((c) => c.file))])(
  'JSON Schema Test Suite draft7/%s',
  (file) => {
    const groups = cases.filter((c) => c.file === file);

    const local = groups.filter((g) => !g.remote);
    if (local.length) {
      it.each(local)('$description', ({ registration, tests }) => {
        const check = compileJsonSchema(registration.parameters, 'suite');
        const verdicts = tests.map((t) => ({
          test: t.description,
          valid: check(registration.input(t.data)).length === 0,
        }));
        expect(verdicts).toEqual(tests.map((t) => ({ test: t.description, valid: t.valid })));
      });
    }

    const remote = groups.filter((g) => g.remote);
    if (remote.length) {
      it.each(remote)('$description: needs a remote document, refused with config', (g) => {
        const err = configError(() => compileJsonSchema(g.registration.parameters, 'suite'));
        expect(err.code).toBe(ErrorCode.Config);
        expect(err.message).toMatch(/not part of the schema|only JSON Schema draft 2020-12/);
      });
    }
  },
);

it('runs every case of the vendored files: 408 that need no remote document, 15 that do', () => {
  const count = (remote: boolean) =>
    cases.filter((c) => c.remote === remote).reduce((n, c) => n + c.tests.length, 0);
  expect({ local: count(false), remote: count(true) }).toEqual({ local: 408, remote: 15 });
});
