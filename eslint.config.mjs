// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/.nx/**', '**/coverage/**', '**/*.js', '**/*.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Libraries expose src/index.ts only: no deep imports into a sibling package.
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['@toolgate/*/*'], message: 'Import a package by its public entry.' }] },
      ],
    },
  },
  {
    files: ['**/*.spec.ts', '**/*.int.spec.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
