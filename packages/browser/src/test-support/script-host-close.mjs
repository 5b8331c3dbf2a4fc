// A host that is only a script: it starts a browser, closes it and disposes its manager, with no
// server or timer of its own to keep node's event loop alive. Each step prints a line, so a host
// that node ended in the middle of an await (an empty loop) is seen by what is missing.
import { ProcessManager } from '@conch/process';
import { launchChrome } from '../../dist/index.js';

const tempDir = process.argv[2];
const manager = new ProcessManager({ tempDir: () => tempDir, cwd: tempDir });
const chrome = await launchChrome({ manager, tempDir });
process.stdout.write('started\n');
await chrome.close();
process.stdout.write('closed\n');
await manager.dispose();
process.stdout.write('disposed\n');
