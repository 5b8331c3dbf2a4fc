// conch-mcp's process parses each of its schemas (plugin configs, tool inputs, MCP messages) a few
// times, most of them once at start. zod 4 compiles a parser for every object schema on its first
// parse (`new Function`): code V8's code cache cannot keep, so every start paid for it again (the
// cli plugin's default config alone: 12 ms of a 450 ms start on a slow VM; the whole start ~20 ms).
// zod's interpreted path answers the same, in the same 2-5 µs a parse. zod decides when a
// schema is built, so this module is imported first, before any module that builds one. A host
// embedding conch as a library keeps zod's default: this is the server's choice for its own process
// (plugins it discovers share zod's global config, and parse the same way).
import { z } from 'zod';

z.config({ jitless: true });
