import { fillArgv } from './argv-template';

it('fills placeholders as whole argv elements, literals untouched', () => {
  expect(
    fillArgv(['/usr/bin/grep', '-n', '--', { input: 'pattern' }, { input: 'path' }], {
      pattern: 'a b; rm -rf / $(id) `id` *',
      path: 'src/*.ts',
    }),
  ).toEqual({
    ok: true,
    argv: ['/usr/bin/grep', '-n', '--', 'a b; rm -rf / $(id) `id` *', 'src/*.ts'],
  });
});

it('turns numbers and booleans into their JSON text', () => {
  expect(fillArgv(['t', { input: 'n' }, { input: 'b' }], { n: 42.5, b: false })).toEqual({
    ok: true,
    argv: ['t', '42.5', 'false'],
  });
});

it('refuses what cannot be one argument, naming each field', () => {
  expect(
    fillArgv(['t', { input: 'a' }, { input: 'o' }, { input: 'missing' }, { input: 'nan' }], {
      a: ['x'],
      o: { x: 1 },
      nan: Number.NaN,
    }),
  ).toEqual({
    ok: false,
    issues: [
      { path: ['a'], message: 'must be a string, number or boolean to be a command argument' },
      { path: ['o'], message: 'must be a string, number or boolean to be a command argument' },
      { path: ['missing'], message: 'is required by the command' },
      { path: ['nan'], message: 'must be a string, number or boolean to be a command argument' },
    ],
  });
  expect(fillArgv(['t', { input: 'toString' }], {})).toMatchObject({ ok: false });
  expect(fillArgv(['t', { input: 'x' }], { x: 'a\0b' })).toMatchObject({ ok: false });
});

it('refuses a value that would read as an option unless the element allows it', () => {
  expect(fillArgv(['rm', { input: 'file' }], { file: '-rf' })).toEqual({
    ok: false,
    issues: [{ path: ['file'], message: 'must not start with "-" (it would be an option)' }],
  });
  expect(fillArgv(['calc', { input: 'n', allowLeadingDash: true }], { n: -3 })).toEqual({
    ok: true,
    argv: ['calc', '-3'],
  });
});
