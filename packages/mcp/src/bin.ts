#!/usr/bin/env node
// The conch-mcp bin: a launcher small enough to run before anything is compiled. Node >= 22.1
// keeps the code it compiles in a cache on disk (os.tmpdir()/node-compile-cache; off with
// NODE_DISABLE_COMPILE_CACHE=1), so every start after the first skips compiling the server's ~3 MB
// of JavaScript. It must be turned on before the server's modules load, hence the dynamic import.
import module from 'node:module';

(module as { enableCompileCache?: () => unknown }).enableCompileCache?.();
await import('./main.js');
