#!/usr/bin/env node
// The host API in a few lines: discover plugins, expose one, hand its schema to a model, run a call.
import 'reflect-metadata';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PluginRegistry } from '@conch/core';

const registry = new PluginRegistry({
  cwd: process.cwd(),
  searchPaths: [dirname(fileURLToPath(import.meta.url))],
});
try {
  const report = await registry.discover();
  console.log(
    `discovered plugins: ${registry
      .plugins()
      .map((p) => p.name)
      .join(', ')}`,
  );
  for (const error of report.errors) console.log(`skipped: ${error.message}`);
  registry.exposeTool('word-count', { max_bytes: 1_000_000 });
  console.log('\ntool schemas given to the model (openai format):');
  console.log(JSON.stringify(registry.toolSchemas('openai'), null, 2));
  console.log('\nmodel calls word_count({ path: "README.md" }) ->');
  console.log(await registry.execute('word_count', { path: 'README.md' }));
} finally {
  await registry.dispose();
}
