// vitest setup file: the bash parser is loaded before any test runs, so tests can expose the
// permission plugin with `registry.exposeSync` (its setup is asynchronous only until the parser
// has loaded once in the process). parser-load.test.ts covers the first, asynchronous exposure in
// a fresh process.
import { permissionReady } from '../plugin.js';

await permissionReady();
