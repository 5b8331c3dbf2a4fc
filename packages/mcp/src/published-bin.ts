#!/usr/bin/env node
// The published conch-mcp bin (scripts/bundle.mjs bundles it as dist/package/dist/bin.cjs; the
// workspace's bin is bin.ts). It runs the self-contained server, main.cjs beside it, from V8's code
// cache (compile-cache.ts): every start after the first skips compiling it. Node >= 22.1 also
// caches, with its own compile cache, what the server loads from outside itself (node-pty's
// JavaScript, web-tree-sitter, discovered plugins).
import module from 'node:module';
import { fileURLToPath } from 'node:url';
import { runWithCompileCache } from './compile-cache.js';

/**
 * `@conch/core`'s IMPORT_MODULE_HOOK, by its registry key: importing it from the package would
 * bundle core's index (reflect-metadata and all, ~45 KB) into this launcher. core's tests pin the
 * key; packed.test.ts's discovered plugin loads only through this hook.
 */
const IMPORT_MODULE_HOOK = Symbol.for('conch.importModule');

(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();
// Code run from the cache cannot import() (compile-cache.ts): plugin discovery imports through this.
(globalThis as Record<symbol, unknown>)[IMPORT_MODULE_HOOK] = (specifier: string) => import(specifier);
// main.cjs is written wrapped (scripts/bundle.mjs): V8 compiles its text without another copy.
runWithCompileCache(fileURLToPath(new URL('./main.cjs', import.meta.url)), { wrapped: true });
