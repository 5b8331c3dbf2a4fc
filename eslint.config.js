// Lint rules shared by every package: typed rules catch floating promises and keep imports type-only.
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['**/dist/**', '**/node_modules/**', '**/.turbo/**', 'bench/results/**', '**/*.d.ts'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
      'no-console': 'error',
    },
  },
  {
    files: ['**/*.test.ts', '**/*.test.tsx', 'bench/**', 'apps/**', 'examples/**', '**/scripts/**'],
    rules: { 'no-console': 'off' },
  },
  {
    // Node 20 and 22 keep every synchronous (l)stat in one buffer that the module loader's cached
    // realpath reads (nodejs/node#51142): one left on a socket or FIFO makes the host's next import
    // of a symlinked package misresolve. Product code stats paths only through @conch/core's
    // safeStatSync and safeLstatSync (packages/core/src/stale-stat.ts), which never leave it there.
    // And reads files through readRegularFileSync (packages/core/src/regular-file.ts): between a
    // check and readFileSync's open, a process the agent left running can put a FIFO (the open
    // blocks the host forever) or a device in a file's place.
    files: ['packages/*/src/**/*.ts'],
    ignores: [
      '**/*.test.ts',
      'packages/test-support/**',
      'packages/*/src/test-support/**',
      'packages/core/src/stale-stat.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        ...['node:fs', 'fs'].map((name) => ({
          name,
          importNames: ['statSync', 'lstatSync'],
          message:
            "use safeStatSync / safeLstatSync from '@conch/core' (node's shared stat buffer, nodejs/node#51142)",
        })),
        ...['node:fs', 'fs', 'node:fs/promises', 'fs/promises'].map((name) => ({
          name,
          importNames: ['readFileSync', 'readFile'],
          message:
            "use readRegularFileSync from '@conch/core': a file a sandboxed command could have written may be a FIFO (open blocks the host forever), a device or gigabytes by the time it is opened. The kernel's /proc files and conch's own may use readFileSync with a disable comment saying so.",
        })),
      ],
      'no-restricted-syntax': [
        'error',
        {
          selector:
            "CallExpression[callee.type='MemberExpression'][callee.property.name=/^(statSync|lstatSync|readFileSync)$/]",
          message:
            "use safeStatSync / safeLstatSync / readRegularFileSync from '@conch/core' (node's shared stat buffer, nodejs/node#51142; a file the agent wrote may be a FIFO)",
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: { globals: globals.node },
  },
);
