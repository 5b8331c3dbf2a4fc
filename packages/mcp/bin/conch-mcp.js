#!/usr/bin/env node
// The conch-mcp bin in the workspace: a committed file, so `pnpm install` links it before anything
// is built (a bin pointing into dist/ made every fresh install warn "Failed to create bin"). It runs
// the built server; the published package's bin is dist/bin.js itself (scripts/bundle.mjs).
import '../dist/bin.js';
