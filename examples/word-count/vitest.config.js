import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// conch's state (the trust store) goes to a throwaway directory, never the user's ~/.local/state.
const state = mkdtempSync(join(tmpdir(), 'conch-word-count-state-'));
// Removed when vitest's main process ends (workers only receive the path in their env).
process.once('exit', () => rmSync(state, { recursive: true, force: true }));

export default defineConfig({ test: { include: ['*.test.js'], env: { XDG_STATE_HOME: state } } });
