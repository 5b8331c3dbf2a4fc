// Run inside a container by containers.test.ts: exposes permission + cli on a registry rooted at
// argv[2] (with `sandbox: argv[3]` when given), runs one everyday write, and prints what conch
// said as one JSON line: the exposure's error, the status, the instructions and the call's result.
import 'reflect-metadata';
import { cliPlugin } from '@conch/cli';
import { PluginRegistry } from '@conch/core';
import { permissionPlugin } from '@conch/permission';

const [ws, sandbox] = process.argv.slice(2);
const out = {};
const registry = new PluginRegistry({ cwd: ws, plugins: [permissionPlugin, cliPlugin] });
try {
  await registry.expose('permission', sandbox ? { sandbox } : {});
  await registry.expose('cli', {});
  out.status = await registry.status();
  out.instructions = registry.systemInstructions();
  out.write = await registry.execute('cli_based_tool', {
    command: 'echo made > f.txt && cat f.txt',
    background: false,
    timeout: 120,
  });
} catch (error) {
  out.error = { code: error.code, name: error.name, message: error.message };
}
await registry.dispose();
process.stdout.write(`${JSON.stringify(out)}\n`);
