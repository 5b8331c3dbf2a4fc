// A host process for the SIGKILL test: creates an environment with a local browser and a
// command running, prints where they are, then idles until it is killed (no exit hook runs on SIGKILL).
import { createEnvironment } from '../../dist/index.js';

const [workingDir, tmpRoot] = process.argv.slice(2);
const env = await createEnvironment({
  workingDir,
  tmpRoot,
  cdpUrl: 'auto',
  plugins: { permission: {}, cli: {}, background: {} },
});
// The temp dir in its command line lets the test find it.
const command = env.processes.manager.spawn('sh', ['-c', 'sleep 300', env.tmpDir]);
await command.spawned;
process.stdout.write(`${JSON.stringify({ tmpDir: env.tmpDir, httpUrl: env.browser.httpUrl })}\n`);
setInterval(() => {}, 1000);
