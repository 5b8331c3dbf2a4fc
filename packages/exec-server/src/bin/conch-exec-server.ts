#!/usr/bin/env node
/**
 * `conch-exec-server`: serves one connection on stdin/stdout (for a target where the server is
 * installed by hand; hosts normally deploy the bundle themselves). `--bundle-dir` prints where this
 * package's deployable bundle is, e.g. to bake it into an image. `--attach <socket>` is the attach
 * relay a re-attaching client runs (see server/attach-relay.ts).
 */
import { bundleDir } from '../bundle/bundle.js';
import { attach } from '../server/attach-relay.js';
import { main } from '../server/main.js';

const attachAt = process.argv.indexOf('--attach');
if (process.argv.includes('--bundle-dir')) {
  process.stdout.write(`${bundleDir()}\n`);
} else if (attachAt !== -1) {
  attach({ socket: process.argv[attachAt + 1] ?? '' });
} else {
  main({ bundle: null });
}
