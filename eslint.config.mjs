// @ts-check
import js from '@eslint/js';
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

/**
 * Module boundaries (STYLE: "services never import each other; enforce the boundaries with Nx
 * tags"). Tags live in each project's package.json under `nx.tags`.
 *
 * - type:contracts — what crosses a process boundary; depends on nothing of ours.
 * - type:lib       — shared libraries; contracts and other libs.
 * - type:testing   — test helpers; contracts and libs.
 * - type:service   — one deployable; contracts and libs, never another service.
 * - type:launcher  — the all-in-one process: it starts every service, so it may import them.
 * - type:test      — system tests; anything.
 *
 * Test helpers (type:testing) are for tests: only spec files of libs and services may import them.
 */
const productionConstraints = [
  { sourceTag: 'type:contracts', onlyDependOnLibsWithTags: [] },
  { sourceTag: 'type:lib', onlyDependOnLibsWithTags: ['type:contracts', 'type:lib'] },
  { sourceTag: 'type:testing', onlyDependOnLibsWithTags: ['type:contracts', 'type:lib'] },
  { sourceTag: 'type:service', onlyDependOnLibsWithTags: ['type:contracts', 'type:lib'] },
  {
    sourceTag: 'type:launcher',
    onlyDependOnLibsWithTags: ['type:contracts', 'type:lib', 'type:service'],
  },
  { sourceTag: 'type:test', onlyDependOnLibsWithTags: ['*'] },
];
const specConstraints = productionConstraints.map((c) =>
  c.sourceTag === 'type:lib' || c.sourceTag === 'type:service'
    ? { ...c, onlyDependOnLibsWithTags: [...c.onlyDependOnLibsWithTags, 'type:testing'] }
    : c,
);
const boundaries = (depConstraints) => [
  'error',
  { enforceBuildableLibDependency: false, allow: [], depConstraints },
];
const specFiles = ['**/*.spec.ts', '**/*.int.spec.ts', '**/test/**/*.ts', 'test/src/**/*.ts'];

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '**/.nx/**',
      '**/coverage/**',
      '**/*.js',
      '**/*.mjs',
      // The approvals console is plain browser JavaScript: linted below.
      '!services/gateway/console/*.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    plugins: { '@nx': nx },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      // Libraries expose src/index.ts only: no deep imports into a sibling package.
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@toolgate/*/*'], message: 'Import a package by its public entry.' },
          ],
        },
      ],
      '@nx/enforce-module-boundaries': boundaries(productionConstraints),
    },
  },
  {
    files: specFiles,
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Tests read JSON bodies off the wire; typing every response shape adds nothing there.
      '@typescript-eslint/no-explicit-any': 'off',
      '@nx/enforce-module-boundaries': boundaries(specConstraints),
    },
  },
  {
    // The approvals console runs in a browser on attacker-controlled data: it builds DOM nodes
    // and text, never HTML from strings (its Trusted Types CSP enforces the same at run time).
    files: ['services/gateway/console/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: {
        window: 'readonly',
        document: 'readonly',
        location: 'readonly',
        sessionStorage: 'readonly',
        fetch: 'readonly',
        URL: 'readonly',
        Blob: 'readonly',
        CSS: 'readonly',
        TextDecoderStream: 'readonly',
        AbortController: 'readonly',
        setTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
      },
    },
    rules: {
      'no-restricted-properties': [
        'error',
        ...['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'write', 'writeln'].map(
          (property) => ({ property, message: 'Build nodes with dom.js; never HTML strings.' }),
        ),
      ],
      'no-restricted-globals': ['error', 'eval'],
    },
  },
);
