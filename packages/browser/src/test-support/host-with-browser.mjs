// A host process for the SIGKILL test: starts a browser through a supervised ProcessManager, with
// its profile in a temp dir of its own like a registry's (owner record included), prints where it
// is, then idles until it is killed (no exit hook can run on SIGKILL).
import { makeTempDir } from '@conch/core';
import { ProcessManager } from '@conch/process';
import { launchChrome } from '../../dist/index.js';

const tempDir = makeTempDir('conch-', { root: process.argv[2] });
const manager = new ProcessManager({ tempDir: () => tempDir, cwd: tempDir });
const chrome = await launchChrome({ manager, tempDir });
process.stdout.write(`${JSON.stringify({ profileDir: chrome.profileDir, httpUrl: chrome.httpUrl })}\n`);
setInterval(() => {}, 1000);
