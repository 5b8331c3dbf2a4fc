#!/usr/bin/env node
/**
 * `conch-exec-server`: serves one connection on stdin/stdout (for a target where the server is
 * installed by hand; hosts normally deploy the bundle themselves). `--bundle-dir` prints where this
 * package's deployable bundle is, e.g. to bake it into an image.
 */
import { bundleDir } from '../bundle/bundle.js';
import { main } from '../server/main.js';

if (process.argv.includes('--bundle-dir')) {
  process.stdout.write(`${bundleDir()}\n`);
} else {
  main({ bundle: null });
}
