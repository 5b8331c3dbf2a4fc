#!/usr/bin/env node
// Copies the bash grammar's WASM (and its license) from the tree-sitter-bash package, a build-time
// dependency only, into dist/: the published package ships these 1.3 MB instead of depending on
// tree-sitter-bash (20 MB of sources, bindings and prebuilt native parsers, and an install script
// that runs node-gyp-build) for one file. src/parser.ts loads dist/tree-sitter-bash.wasm.
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const grammar = dirname(createRequire(import.meta.url).resolve('tree-sitter-bash/package.json'));
mkdirSync(join(ROOT, 'dist'), { recursive: true });
copyFileSync(join(grammar, 'tree-sitter-bash.wasm'), join(ROOT, 'dist', 'tree-sitter-bash.wasm'));
copyFileSync(join(grammar, 'LICENSE'), join(ROOT, 'dist', 'tree-sitter-bash.LICENSE'));
