import 'reflect-metadata';
import { PluginRegistry } from '@conch/core';
import { backgroundPlugin } from '@conch/background';
import { cliPlugin } from '@conch/cli';
import { permissionPlugin } from '@conch/permission';
const mode = process.argv[2] ?? 'off';
const registry = new PluginRegistry({ plugins: [permissionPlugin, cliPlugin, backgroundPlugin] });
await registry.expose('permission', mode === 'off' ? { sandbox: 'off', kernelWall: false } : {});
await registry.expose('cli', {});
const n = Number(process.argv[3] ?? 2000);
for (let i = 0; i < 200; i++) await registry.execute('cli_based_tool', { command: 'true' });
const before = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < n; i++) {
  const r = await registry.execute('cli_based_tool', { command: 'true' });
  if (r.returncode !== 0) throw new Error(JSON.stringify(r));
}
const used = process.cpuUsage(before);
console.log(mode, 'wall/call', ((performance.now() - t0) / n).toFixed(3), 'ms; cpu/call', ((used.user + used.system) / 1000 / n).toFixed(3), 'user', (used.user/1000/n).toFixed(3), 'sys', (used.system/1000/n).toFixed(3));
await registry.dispose();
